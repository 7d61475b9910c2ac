"""Novel views on the CPU, headless: point splatting for point clouds, open3d ray casting for meshes.

Both take a world→camera pose E (4x4, OpenCV axes) and intrinsics K for the output size, and return an RGB
uint8 image (H, W, 3); pixels nothing projects to are `background`.
"""

from __future__ import annotations

import numpy as np


def intrinsics_for(K, src_size: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    """K of a (width, height) image rescaled to another size, keeping the field of view."""
    (w0, h0), (w1, h1) = src_size, size
    S = np.diag([w1 / w0, h1 / h0, 1.0])
    return S @ np.asarray(K, dtype=np.float64)


def splat_points(points, E, K, width: int, height: int, radius: int | None = None,
                 background=(255, 255, 255)) -> np.ndarray:
    """Render (N,3|6) points (RGB in 0..1 when given) as small squares, nearest point wins (a z-buffer by order).

    The square's side shrinks with depth, so near surfaces stay closed and far ones keep their detail."""
    pts = np.asarray(points, dtype=np.float64)
    img = np.empty((height, width, 3), dtype=np.uint8)
    img[:] = background
    if len(pts) == 0:
        return img
    xyz = pts[:, :3]
    rgb = (np.clip(pts[:, 3:6], 0, 1) * 255).astype(np.uint8) if pts.shape[1] >= 6 else \
        np.full((len(pts), 3), 80, dtype=np.uint8)
    cam = xyz @ np.asarray(E)[:3, :3].T + np.asarray(E)[:3, 3]
    front = (cam[:, 2] > 1e-6) & np.isfinite(cam).all(axis=1)
    cam, rgb = cam[front], rgb[front]
    if len(cam) == 0:
        return img
    uvw = cam @ np.asarray(K).T
    u, v, z = uvw[:, 0] / uvw[:, 2], uvw[:, 1] / uvw[:, 2], cam[:, 2]
    if radius is None:
        # Squares a little wider than the mean spacing of the points on the image (at the median depth), so a
        # sampled surface renders closed; the side shrinks with depth, so near surfaces stay closed too.
        spacing = np.sqrt(max(width * height, 1) / max(len(cam), 1))
        sides = np.clip(np.ceil(spacing * np.median(z) / z) + 1, 1, 9).astype(int)
    else:
        sides = np.full(len(z), 2 * radius + 1)
    return _splat(u, v, z, sides, rgb, width, height, background)


def _splat(u, v, z, sides, rgb, width, height, background):
    """Paint each point's square; a depth buffer keeps, per pixel, the nearest point's colour."""
    depth = np.full(height * width, np.inf)
    out = np.empty((height * width, 3), dtype=np.uint8)
    out[:] = background
    xs, ys, zs, idx = [], [], [], []
    for side in np.unique(sides):
        sel = np.nonzero(sides == side)[0]
        half = side // 2
        for dy in range(-half, side - half):
            for dx in range(-half, side - half):
                xs.append(np.round(u[sel]).astype(np.int64) + dx)
                ys.append(np.round(v[sel]).astype(np.int64) + dy)
                zs.append(z[sel])
                idx.append(sel)
    x, y, zz, ii = (np.concatenate(a) for a in (xs, ys, zs, idx))
    ok = (x >= 0) & (x < width) & (y >= 0) & (y < height)
    flat, zz, ii = y[ok] * width + x[ok], zz[ok], ii[ok]
    np.minimum.at(depth, flat, zz)
    win = zz <= depth[flat]
    out[flat[win]] = rgb[ii[win]]
    return out.reshape(height, width, 3)


def raycast_mesh(vertices, triangles, E, K, width: int, height: int, vertex_colors=None,
                 background=(255, 255, 255)) -> np.ndarray:
    """Render a triangle mesh by casting one ray per pixel (open3d's RaycastingScene, CPU): each pixel gets the
    colour of the triangle it hits (interpolated vertex colours when given, else shading by the normal)."""
    try:
        import open3d as o3d
    except ImportError as err:
        raise RuntimeError(f"mesh rendering needs open3d: {err} (pip install 'toolpath[spatial]'; on Debian also "
                           f"apt-get install libusb-1.0-0)") from None
    V = np.asarray(vertices, dtype=np.float32)
    T = np.asarray(triangles, dtype=np.uint32)
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(V), o3d.core.Tensor(T))
    E = np.asarray(E, dtype=np.float64)
    rays = o3d.t.geometry.RaycastingScene.create_rays_pinhole(
        intrinsic_matrix=o3d.core.Tensor(np.asarray(K, dtype=np.float64)),
        extrinsic_matrix=o3d.core.Tensor(E), width_px=int(width), height_px=int(height))
    hit = scene.cast_rays(rays)
    prim = hit["primitive_ids"].numpy()
    found = prim != o3d.t.geometry.RaycastingScene.INVALID_ID
    img = np.empty((height, width, 3), dtype=np.uint8)
    img[:] = background
    if not found.any():
        return img
    if vertex_colors is not None:
        C = np.asarray(vertex_colors, dtype=np.float64)
        uv = hit["primitive_uvs"].numpy()[found]
        tri = T[prim[found].astype(np.int64)]
        w = np.stack([1 - uv[:, 0] - uv[:, 1], uv[:, 0], uv[:, 1]], axis=1)
        col = (C[tri] * w[:, :, None]).sum(axis=1)
    else:
        n = hit["primitive_normals"].numpy()[found]
        view = rays.numpy()[found][:, 3:6]
        view /= np.linalg.norm(view, axis=1, keepdims=True)
        col = np.repeat(0.25 + 0.75 * np.abs((n * view).sum(axis=1, keepdims=True)), 3, axis=1)
    img[found] = (np.clip(col, 0, 1) * 255).astype(np.uint8)
    return img

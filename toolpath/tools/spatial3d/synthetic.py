"""Synthetic scenes with known cameras, for the classic backend's tests and benchmark.

A room (floor, ceiling, four walls) with 6–9 boxes standing on the floor, every face a rectangle with its
own random multi-octave colour texture, ray-cast from pinhole cameras in the OpenCV convention (x right,
y down, z forward; world y points down too, the floor is at y = +FLOOR). Nothing here is fitted to the
reconstruction: the images come from geometry alone, so the poses they were taken from are ground truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FLOOR, CEILING = 1.5, -2.0  # y of the floor and ceiling (y down)
TEXELS_PER_UNIT = 100  # about one texel per pixel at 4 units with f ≈ 400: textures neither blur nor alias much


@dataclass
class Quad:
    """A textured rectangle: corner `origin`, edges `a` and `b` (orthogonal), texture (h, w, 3) uint8 whose
    columns run along `a` and rows along `b`."""

    origin: np.ndarray
    a: np.ndarray
    b: np.ndarray
    texture: np.ndarray


def texture(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Colour noise summed over octaves (periods 3..64 texels): blobs at every scale, so SIFT finds features
    at the scales each view sees the surface at."""
    import cv2

    out = np.zeros((height, width, 3), np.float32)
    for period, weight in ((64, 1.0), (24, 0.9), (8, 0.9), (3, 0.9)):
        small = rng.random((max(2, height // period + 2), max(2, width // period + 2), 3)).astype(np.float32)
        out += weight * cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
    out -= out.min()
    return (255 * out / max(float(out.max()), 1e-6)).astype(np.uint8)


def _quad(rng, origin, a, b) -> Quad:
    origin, a, b = (np.asarray(v, dtype=np.float64) for v in (origin, a, b))
    w = max(8, int(np.linalg.norm(a) * TEXELS_PER_UNIT))
    h = max(8, int(np.linalg.norm(b) * TEXELS_PER_UNIT))
    return Quad(origin, a, b, texture(rng, w, h))


def _box(rng, x0, z0, sx, sz, height) -> list[Quad]:
    """The five visible faces of a box standing on the floor, footprint [x0, x0+sx] × [z0, z0+sz]."""
    top = FLOOR - height
    faces = [
        ((x0, top, z0), (sx, 0, 0), (0, height, 0)),  # face towards −z
        ((x0, top, z0 + sz), (sx, 0, 0), (0, height, 0)),  # face towards +z
        ((x0, top, z0), (0, 0, sz), (0, height, 0)),  # face towards −x
        ((x0 + sx, top, z0), (0, 0, sz), (0, height, 0)),  # face towards +x
        ((x0, top, z0), (sx, 0, 0), (0, 0, sz)),  # top
    ]
    return [_quad(rng, *f) for f in faces]


def room(seed: int = 0, half_width: float = 4.0, front: float = 6.0, back: float = -4.0) -> list[Quad]:
    """The room and 6–9 boxes 2.7–3.6 units from the middle, where the cameras stand (within 1.5 of it): enough
    relief that two views rarely share a single plane only (which can leave their relative pose ambiguous)."""
    rng = np.random.default_rng(seed)
    hw, hgt = half_width, FLOOR - CEILING
    quads = [
        _quad(rng, (-hw, FLOOR, back), (2 * hw, 0, 0), (0, 0, front - back)),  # floor
        _quad(rng, (-hw, CEILING, back), (2 * hw, 0, 0), (0, 0, front - back)),  # ceiling
        _quad(rng, (-hw, CEILING, front), (2 * hw, 0, 0), (0, hgt, 0)),  # front wall
        _quad(rng, (-hw, CEILING, back), (2 * hw, 0, 0), (0, hgt, 0)),  # back wall
        _quad(rng, (-hw, CEILING, back), (0, 0, front - back), (0, hgt, 0)),  # left wall
        _quad(rng, (hw, CEILING, back), (0, 0, front - back), (0, hgt, 0)),  # right wall
    ]
    for _ in range(int(rng.integers(6, 10))):
        ang, dist = rng.uniform(0, 2 * math.pi), rng.uniform(2.7, 3.6)
        sx, sz, h = rng.uniform(0.4, 1.0), rng.uniform(0.4, 1.0), rng.uniform(0.6, 2.5)
        cx, cz = dist * math.sin(ang), dist * math.cos(ang)
        quads += _box(rng, cx - sx / 2, cz - sz / 2, sx, sz, h)
    return quads


def look_pose(center, yaw_deg: float, pitch_deg: float = 0.0) -> np.ndarray:
    """World→camera 4x4 of a camera at `center` turned left by `yaw_deg` from looking along world +z and
    tilted up by `pitch_deg` (OpenCV axes; the world's y points down like the camera's)."""
    from .poses import yaw_matrix

    p = math.radians(pitch_deg)
    tilt = np.array([[1.0, 0.0, 0.0], [0.0, math.cos(p), math.sin(p)], [0.0, -math.sin(p), math.cos(p)]])
    body = yaw_matrix(yaw_deg) @ tilt  # camera axes (columns) in world coordinates
    E = np.eye(4)
    E[:3, :3] = body.T
    E[:3, 3] = -body.T @ np.asarray(center, dtype=np.float64)
    return E


def intrinsics(width: int = 640, height: int = 480, fov_deg: float = 75.0) -> np.ndarray:
    f = (width / 2) / math.tan(math.radians(fov_deg) / 2)
    return np.array([[f, 0.0, (width - 1) / 2], [0.0, f, (height - 1) / 2], [0.0, 0.0, 1.0]])


def render(quads: list[Quad], E: np.ndarray, K: np.ndarray, width: int, height: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ray-cast the quads: the RGB image (h, w, 3) uint8, the depth (camera z; inf where nothing is hit) and
    which quad each pixel shows (−1: none)."""
    import cv2

    R, t = E[:3, :3], E[:3, 3]
    C = -R.T @ t
    u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    rays_cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], axis=-1)
    rays = rays_cam @ R  # world directions (R.T @ d for each d), camera-z component 1 so hit distance = depth
    depth = np.full((height, width), np.inf)
    image = np.zeros((height, width, 3), np.uint8)
    ids = np.full((height, width), -1, np.int32)
    for qid, q in enumerate(quads):
        n = np.cross(q.a, q.b)
        denom = rays @ n
        with np.errstate(divide="ignore", invalid="ignore"):
            s = ((q.origin - C) @ n) / denom
        hit = C + s[..., None] * rays - q.origin
        fa = hit @ q.a / (q.a @ q.a)
        fb = hit @ q.b / (q.b @ q.b)
        inside = (s > 1e-6) & (fa >= 0) & (fa <= 1) & (fb >= 0) & (fb <= 1) & (s < depth)
        if not inside.any():
            continue
        th, tw = q.texture.shape[:2]
        mx = (fa * (tw - 1)).astype(np.float32)
        my = (fb * (th - 1)).astype(np.float32)
        sampled = cv2.remap(q.texture, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        image[inside] = sampled[inside]
        depth[inside] = s[inside]
        ids[inside] = qid
    return image, depth, ids


def surface_points(depth: np.ndarray, E: np.ndarray, K: np.ndarray, step: int = 8) -> np.ndarray:
    """World points seen in a rendered view (every `step`-th pixel): the ground truth's visible scene, so the
    "no significant movement" threshold, relative to the scene's extent, compares like with like."""
    v, u = np.mgrid[0:depth.shape[0]:step, 0:depth.shape[1]:step]
    z = depth[v, u]
    ok = np.isfinite(z)
    cam = np.stack([(u[ok] - K[0, 2]) / K[0, 0] * z[ok], (v[ok] - K[1, 2]) / K[1, 1] * z[ok], z[ok]], axis=1)
    return (cam - E[:3, 3]) @ E[:3, :3]  # R.T @ (x - t) for each row


@dataclass
class Views:
    images: list[np.ndarray]
    extrinsics: np.ndarray  # (n, 4, 4) ground truth, camera 0 at the world origin
    K: np.ndarray
    points: np.ndarray  # ground-truth visible surface points, world frame = camera 0's
    shared_planes: int = 0  # non-parallel surfaces views 0 and 1 both see (1: their pose is ambiguous)
    redrawn: int = 0  # draws random_pair threw away (sharing one plane or too little) before this one


def random_pair(seed: int, width: int = 640, height: int = 480, fov_deg: float = 75.0,
                yaw_range=(10.0, 60.0), move_range=(0.6, 1.0), relief: bool = True) -> Views:
    """Two views of a random room: camera 1 turned by 10–60° (either way) about the up axis and moved
    0.6–1.0 units in a random ground-plane direction (plus a little height) from camera 0.

    With `relief`, a draw is redrawn unless two differently oriented surfaces each fill ≥ 15 % of what both
    views see: from one shared plane the true pose often has a mirror twin that fits as well, which no
    two-view method can tell apart, so such a pair tests declining, not accuracy (relief=False keeps every
    draw). Poses are re-expressed with camera 0
    as the world frame, as reconstructions are."""
    for attempt in range(50):
        pair = _draw(np.random.default_rng([seed, attempt]), seed, width, height, fov_deg, yaw_range, move_range)
        pair.redrawn = attempt
        if not relief or pair.shared_planes >= 2:
            return pair
    return pair


def _draw(rng, seed, width, height, fov_deg, yaw_range, move_range) -> Views:
    c0 = np.array([rng.uniform(-0.3, 0.3), rng.uniform(-0.2, 0.2), rng.uniform(-0.3, 0.3)])
    yaw0 = rng.uniform(0, 360)
    E0 = look_pose(c0, yaw0, rng.uniform(-5, 5))
    d_yaw = rng.uniform(*yaw_range) * rng.choice([-1, 1])
    heading = math.radians(yaw0 + rng.uniform(0, 360))  # movement direction, relative to where camera 0 looks
    dist = rng.uniform(*move_range)
    c1 = c0 + np.array([-dist * math.sin(heading), rng.uniform(-0.1, 0.1), dist * math.cos(heading)])
    E1 = look_pose(c1, yaw0 + d_yaw, rng.uniform(-5, 5))
    return _shoot(room(seed), [E0, E1], intrinsics(width, height, fov_deg), width, height)


def random_views(seed: int, n: int = 4, width: int = 640, height: int = 480, fov_deg: float = 75.0) -> Views:
    """n views of a random room along a path: each camera turned 10–25° (either way) from the one before and
    moved 0.3–0.6 units, so neighbours overlap and later views are reached through earlier ones (PnP)."""
    rng = np.random.default_rng([seed, 99])
    c = np.array([rng.uniform(-0.3, 0.3), 0.0, rng.uniform(-0.3, 0.3)])
    yaw = rng.uniform(0, 360)
    poses = []
    for k in range(n):
        if k:
            heading = math.radians(yaw + rng.uniform(0, 360))
            step = rng.uniform(0.3, 0.6)
            c = c + np.array([-step * math.sin(heading), rng.uniform(-0.05, 0.05), step * math.cos(heading)])
            c[[0, 2]] = np.clip(c[[0, 2]], -1.0, 1.0)  # stay in the middle, clear of the boxes
            yaw += rng.uniform(10, 25) * rng.choice([-1, 1])
        poses.append(look_pose(c, yaw, rng.uniform(-5, 5)))
    return _shoot(room(seed), poses, intrinsics(width, height, fov_deg), width, height)


def _shoot(quads, poses, K, width, height) -> Views:
    """Render every pose; express poses and points with camera 0 as the world frame."""
    renders = [render(quads, E, K, width, height) for E in poses]
    pts = np.concatenate([surface_points(d, E, K) for (_, d, _), E in zip(renders, poses)])
    E0 = poses[0]
    to_cam0 = np.linalg.inv(E0)  # world → camera-0 frame for poses: E' = E · E0⁻¹
    ext = np.stack([E @ to_cam0 for E in poses])
    shared = _shared_planes(quads, renders[:2], poses[:2], K)
    return Views([r[0] for r in renders], ext, K, pts @ E0[:3, :3].T + E0[:3, 3], shared)


def _shared_planes(quads, renders, poses, K, step: int = 4) -> int:
    """How many distinct plane orientations cover ≥ 15 % each of what both views see (≥ 10 % of view 0)."""
    (_, d0, ids0), (_, d1, _) = renders
    E0, E1 = poses
    v, u = np.mgrid[0:d0.shape[0]:step, 0:d0.shape[1]:step]
    X = surface_points(d0, E0, K, step)  # world points of view 0's finite-depth samples, row-major
    q = ids0[v, u][np.isfinite(d0[v, u])]
    c = X @ E1[:3, :3].T + E1[:3, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        px = c[:, 0] / c[:, 2] * K[0, 0] + K[0, 2]
        py = c[:, 1] / c[:, 2] * K[1, 1] + K[1, 2]
    h, w = d1.shape
    inside = (c[:, 2] > 0) & (px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
    seen = np.zeros(len(X), bool)
    xi, yi = np.round(px[inside]).astype(int), np.round(py[inside]).astype(int)
    seen[np.flatnonzero(inside)] = np.abs(d1[yi, xi] - c[inside, 2]) < 0.02 * c[inside, 2]  # not occluded
    if seen.sum() < 0.1 * len(X):
        return 0
    normals = []
    for k, n in zip(*np.unique(q[seen], return_counts=True)):
        if n >= 0.15 * seen.sum():
            nk = np.cross(quads[k].a, quads[k].b)
            nk /= np.linalg.norm(nk)
            if all(abs(nk @ m) < 0.95 for m in normals):
                normals.append(nk)
    return len(normals)


# ------------------------------------------------------------------------ measures against ground truth


def rotation_error_deg(E, E_true) -> float:
    """Angle of the rotation between two poses' rotations."""
    R = np.asarray(E)[:3, :3] @ np.asarray(E_true)[:3, :3].T
    return math.degrees(math.acos(float(np.clip((np.trace(R) - 1) / 2, -1, 1))))


def direction_error_deg(E, E_true) -> float:
    """Angle between the directions camera 1 moved in (camera centres; camera 0 at the origin)."""
    c = -np.asarray(E)[:3, :3].T @ np.asarray(E)[:3, 3]
    g = -np.asarray(E_true)[:3, :3].T @ np.asarray(E_true)[:3, 3]
    cos = float(c @ g / (np.linalg.norm(c) * np.linalg.norm(g) + 1e-12))
    return math.degrees(math.acos(max(-1.0, min(1.0, cos))))


def same_description(a: str, b: str, degrees: float = 5.0) -> bool:
    """describe_camera_motion strings that say the same: same movement bin, same turn direction, and turn
    angles within `degrees` (the text rounds the angle, so exact equality would fail on 0.5° of noise)."""
    import re

    def parts(s):
        m = re.search(r"turned (left|right) by about (\d+)°", s)
        return s.split(",")[0], (m.group(1), float(m.group(2))) if m else None

    (move_a, turn_a), (move_b, turn_b) = parts(a), parts(b)
    if move_a != move_b or (turn_a is None) != (turn_b is None):
        return False
    return turn_a is None or (turn_a[0] == turn_b[0] and abs(turn_a[1] - turn_b[1]) <= degrees)

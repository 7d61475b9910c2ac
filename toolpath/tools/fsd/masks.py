"""Binary-mask geometry for the FSD deciders, on numpy alone: square morphology (separable, so an image costs
O(r) passes), how deep each pixel lies, the bounding box, the convex hull and an interior point.
"""

from __future__ import annotations

import math

import numpy as np


def _grow(mask: np.ndarray, r: int, value: bool) -> np.ndarray:
    """Dilation (value=True) or erosion (value=False) by a (2r+1)-square, separably; outside the image is
    background, so erosion also eats from the image border."""
    out = mask.copy()
    for axis in (0, 1):
        src = out.copy()
        n = src.shape[axis]
        for k in range(1, min(r, n) + 1):
            a = [slice(None)] * 2
            b = [slice(None)] * 2
            a[axis], b[axis] = slice(k, None), slice(None, n - k)
            if value:
                out[tuple(a)] |= src[tuple(b)]
                out[tuple(b)] |= src[tuple(a)]
            else:
                out[tuple(a)] &= src[tuple(b)]
                out[tuple(b)] &= src[tuple(a)]
                # pixels within k of the edge see background beyond it
                e1 = [slice(None)] * 2
                e2 = [slice(None)] * 2
                e1[axis], e2[axis] = slice(0, k), slice(n - k, None)
                out[tuple(e1)] = False
                out[tuple(e2)] = False
    return out


def dilate(mask: np.ndarray, r: int) -> np.ndarray:
    return _grow(mask, r, True) if r > 0 else mask.copy()


def erode(mask: np.ndarray, r: int) -> np.ndarray:
    return _grow(mask, r, False) if r > 0 else mask.copy()


def depth_map(mask: np.ndarray) -> np.ndarray:
    """How many erosions each pixel survives (an approximate distance to the nearest background pixel, in
    pixels; squares and crosses alternate so the distance is octagonal rather than square)."""
    depth = np.zeros(mask.shape, np.int32)
    cur = mask.copy()
    step = 0
    while cur.any():
        depth += cur
        if step % 2 == 0:  # cross (4-neighbour) erosion
            nxt = cur.copy()
            nxt[1:, :] &= cur[:-1, :]
            nxt[:-1, :] &= cur[1:, :]
            nxt[:, 1:] &= cur[:, :-1]
            nxt[:, :-1] &= cur[:, 1:]
            nxt[0, :] = nxt[-1, :] = False
            nxt[:, 0] = nxt[:, -1] = False
        else:
            nxt = erode(cur, 1)
        cur, step = nxt, step + 1
    return depth


def bbox(mask: np.ndarray) -> tuple[int, int, int, int]:
    """(u0, v0, u1, v1), inclusive pixel indices of the mask's extent."""
    vs, us = np.nonzero(mask)
    return int(us.min()), int(vs.min()), int(us.max()), int(vs.max())


def convex_hull(mask: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """The filled convex hull of a mask (pixel centres), as a mask; scaled about its centroid when scale < 1
    (the hull alone then, without the mask)."""
    from PIL import Image, ImageDraw

    rows = np.nonzero(mask.any(axis=1))[0]
    pts = []
    for v in rows:
        us = np.nonzero(mask[v])[0]
        pts.append((int(us[0]), int(v)))
        pts.append((int(us[-1]), int(v)))
    pts = sorted(set(pts))
    if len(pts) < 3:
        return mask.copy()

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    hull = lower[:-1] + upper[:-1]
    img = Image.new("L", (mask.shape[1], mask.shape[0]), 0)
    if scale != 1.0:  # about the hull's own centroid (the mask's is biased by what hides part of it)
        ImageDraw.Draw(img).polygon(hull, fill=1, outline=1)
        vs, us = np.nonzero(np.asarray(img))
        cu, cv = us.mean(), vs.mean()
        img = Image.new("L", (mask.shape[1], mask.shape[0]), 0)
        hull = [(cu + scale * (u - cu), cv + scale * (v - cv)) for u, v in hull]
        ImageDraw.Draw(img).polygon(hull, fill=1)
        return np.asarray(img) > 0
    ImageDraw.Draw(img).polygon(hull, fill=1, outline=1)
    return (np.asarray(img) > 0) | mask


def interior_point(mask: np.ndarray, share: float = 0.6) -> tuple[int, int]:
    """A pixel deep inside the mask (depth ≥ share of its deepest), the one nearest the mask's centroid."""
    u0, v0, u1, v1 = bbox(mask)
    crop = np.zeros((v1 - v0 + 3, u1 - u0 + 3), bool)  # a background border so depth counts from the edge
    crop[1:-1, 1:-1] = mask[v0:v1 + 1, u0:u1 + 1]
    depth = depth_map(crop)
    vs, us = np.nonzero(crop)
    cv, cu = vs.mean(), us.mean()
    deep = depth >= max(1, math.floor(share * depth.max()))
    dv, du = np.nonzero(deep)
    i = int(np.argmin((dv - cv) ** 2 + (du - cu) ** 2))
    return int(du[i] - 1 + u0), int(dv[i] - 1 + v0)

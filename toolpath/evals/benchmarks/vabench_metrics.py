"""The VABench metrics (Yuan et al. 2025, "From Seeing to Doing"): free-space points against a target region,
a visual trace against the ground truth's. The benchmark (vabench.py) and both scoring modes
(vabench_scoring.py) build on these; so does the tabletop suite's trace check.

Each is tested against hand-computed cases in tests/test_vabench.py:

    point_accuracy(points, region)   the fraction of the points inside a box [x1, y1, x2, y2], a polygon
                                     (flat [x1, y1, …] or [[x, y], …]) or a boolean mask (a point counts
                                     where the pixel holding it is true); edges included; no points → 0
    trace_errors(pred, gt, n=None, by="index")
                                     both traces resampled to n points (default: the longer of the two, as
                                     VABench does), then
                                       mae   mean over points of (|dx| + |dy|) / 2
                                       rmse  sqrt(mean over points of dx² + dy²)
                                       dtw   dynamic time warping, Euclidean cost, the summed cost of the best
                                             alignment of the two resampled traces
                                     by="index" is VABench's resampling (linear interpolation at evenly
                                     spaced fractional indices); by="arc" spaces the points evenly by arc
                                     length (tools.spatial.Trace.resample)

The mae and rmse definitions are those of the authors' evaluation code (Embodied-R1's
hf_inference_vabench_visual_trace.py, from FSD's group); their published numbers are on the grid that code
maps pixels onto (x / width * 999), which is where VABench's `score` measures a trace too.
"""

from __future__ import annotations

import math

import numpy as np

from ..scorers import point_in_box, point_in_polygon
from .osworld_g import numbers


def _pairs(points, what: str) -> np.ndarray:
    arr = np.asarray([[float(c) for c in (p.as_list() if hasattr(p, "as_list") else p)] for p in points],
                     dtype=np.float64).reshape(-1, 2) if len(points) else np.zeros((0, 2))
    if not np.isfinite(arr).all():
        raise ValueError(f"{what}: coordinates must be finite numbers")
    return arr


def points_inside(points, region) -> int:
    """How many of `points` lie inside `region` (see point_accuracy)."""
    pts = _pairs(list(points), "point_accuracy points")
    if isinstance(region, np.ndarray) and region.ndim == 2:
        h, w = region.shape
        inside = 0
        for x, y in pts:
            u, v = int(math.floor(x + 0.5)), int(math.floor(y + 0.5))  # the pixel whose centre is nearest
            inside += bool(0 <= u < w and 0 <= v < h and region[v, u])
        return inside
    if hasattr(region, "as_list"):  # a tools.spatial.Box
        region = region.as_list()
    try:
        flat = list(region)
        if flat and all(isinstance(c, (list, tuple, np.ndarray)) for c in flat):  # [[x, y], …]: a polygon
            polygon = len(flat) >= 3 and all(len(c) == 2 for c in flat)
            flat = [float(v) for pair in flat for v in pair] if polygon else []
        flat = [float(v) for v in flat]
    except (TypeError, ValueError):
        flat = []
    if not numbers(flat) or len(flat) < 4 or (len(flat) > 4 and (len(flat) < 6 or len(flat) % 2)):
        raise ValueError(f"point_accuracy: region must be a box [x1, y1, x2, y2], a polygon of >= 3 points or a "
                         f"2-D mask, got {region!r}")
    test = (lambda p: point_in_box(p, flat)) if len(flat) == 4 else (lambda p: point_in_polygon(p, flat))
    return sum(bool(test((x, y))) for x, y in pts)


def point_accuracy(points, region) -> float:
    """The fraction of `points` inside `region`: a box [x1, y1, x2, y2], a polygon (flat or [[x, y], …]) or
    a 2-D boolean mask; edges included; 0.0 for no points."""
    pts = list(points)
    return points_inside(pts, region) / len(pts) if pts else 0.0


def resample_by_index(points, n: int) -> np.ndarray:
    """VABench's resampling: linear interpolation at n evenly spaced fractional indices (first, last kept)."""
    pts = _pairs(list(points), "resample points")
    if len(pts) == 0:
        raise ValueError("resample: no points")
    if len(pts) == 1:
        return np.repeat(pts, n, axis=0)
    at = np.linspace(0, len(pts) - 1, n)
    idx = np.arange(len(pts))
    return np.stack([np.interp(at, idx, pts[:, 0]), np.interp(at, idx, pts[:, 1])], axis=1)


def dtw(a, b) -> float:
    """Dynamic time warping distance of two point sequences: Euclidean cost, summed along the best path."""
    A, B = _pairs(list(a), "dtw a"), _pairs(list(b), "dtw b")
    if len(A) == 0 or len(B) == 0:
        raise ValueError("dtw: both sequences need at least one point")
    cost = np.hypot(A[:, None, 0] - B[None, :, 0], A[:, None, 1] - B[None, :, 1])
    acc = np.full((len(A) + 1, len(B) + 1), np.inf)
    acc[0, 0] = 0.0
    for i in range(1, len(A) + 1):
        for j in range(1, len(B) + 1):
            acc[i, j] = cost[i - 1, j - 1] + min(acc[i - 1, j], acc[i, j - 1], acc[i - 1, j - 1])
    return float(acc[-1, -1])


def trace_errors(pred, gt, n: int | None = None, by: str = "index") -> dict[str, float]:
    """{"mae", "rmse", "dtw", "n"} of a predicted trace against the ground truth (see the module docstring)."""
    P, G = _pairs(list(pred), "trace_errors pred"), _pairs(list(gt), "trace_errors gt")
    for name, arr in (("pred", P), ("gt", G)):
        if len(arr) == 0:
            raise ValueError(f"trace_errors: the {name} trace has no points")
    n = max(len(P), len(G)) if n is None else n
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"trace_errors: n must be a positive integer, got {n!r}")
    if by == "index":
        p, g = resample_by_index(P, n), resample_by_index(G, n)
    elif by == "arc":
        from ...tools.spatial import Trace

        p, g = Trace(tuple(map(tuple, P))).resample(n).array(), Trace(tuple(map(tuple, G))).resample(n).array()
    else:
        raise ValueError(f"trace_errors: by must be 'index' or 'arc', got {by!r}")
    d = p - g
    return {"mae": float(np.mean(np.abs(d).sum(axis=1) / 2)), "rmse": float(np.sqrt(np.mean((d ** 2).sum(axis=1)))),
            "dtw": dtw(p, g), "n": n}

"""Did an edit step leave a visible artifact? A region of blur, noise or JPEG blocking (grounded_quality.py)
in the picture after the step that the picture before did not have and that the step's own area (its mask
or text boxes, grown a little) does not explain: a recolor that also smeared the background, a fill that
left noise beside the object. Every edit tool's check is multiplied by `artifact_free` (edit_base.run_step).

A blur is also judged against the picture before (lost_detail): where the step took away most of the fine
detail outside its area.

Steps that change nothing, change the size, or repaint everything outside a mask (background) are not judged.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

from .grounded_quality import Region, find_regions

ARTIFACTS = ("blur", "noise", "jpeg")
UNJUDGED = ("background", "upscale")  # subtask kinds whose step rightly changes most of the picture
GROW = 8  # px the step's area is grown by: its edges are where its pixels meet the old ones
EXPLAINED = 0.5  # a new region at least this much inside the step's area is the step's doing
DETAIL = 1e-4  # Laplacian energy (luminance in [0, 1]) below which a tile had no detail to lose
KEPT = 0.25  # a tile that keeps less than this share of its detail energy was blurred
# A region is judged against the picture's own baseline, so a step that changes one corner can shift which
# untouched places cross a bar. An artifact the step made lies where it changed pixels: a region whose pixels
# are mostly as they were is not the step's doing.
CHANGED_LEVEL = 3  # of 255, in any channel: a pixel the step changed
CHANGED_SHARE = 0.2  # a new region with fewer changed pixels than this share is the baseline moving


def _overlap(a: list[int], b: list[int]) -> float:
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    return ix * iy


# A search tries every candidate tool on the same state, so the picture before a step is judged many times over;
# its regions are kept by content (a digest, not the array's identity, which numpy may reuse).
_BEFORE_REGIONS: OrderedDict[tuple, list[Region]] = OrderedDict()
_BEFORE_KEPT = 16


def _regions_of_before(before: np.ndarray) -> list[Region]:
    # the detector is part of the key: what it finds depends on it as much as on the picture
    key = (find_regions, before.shape, before.dtype.str, hashlib.blake2b(before.tobytes(), digest_size=16).digest())
    if key in _BEFORE_REGIONS:
        _BEFORE_REGIONS.move_to_end(key)
        return _BEFORE_REGIONS[key]
    regions = find_regions(before)
    _BEFORE_REGIONS[key] = regions
    if len(_BEFORE_REGIONS) > _BEFORE_KEPT:
        _BEFORE_REGIONS.popitem(last=False)
    return regions


def new_artifacts(before: np.ndarray, after: np.ndarray, area: np.ndarray | None) -> list[Region]:
    """The blur/noise/blocking regions of `after` that `before` lacks and `area` (H×W bool, the step's own
    pixels; None for none) does not hold for the most part."""
    old = [r for r in _regions_of_before(before) if r.type in ARTIFACTS]
    changed = np.abs(after.astype(np.int16) - before.astype(np.int16)) > CHANGED_LEVEL
    changed = changed.any(axis=-1) if changed.ndim == 3 else changed
    out = []
    for r in find_regions(after):
        if r.type not in ARTIFACTS:
            continue
        if changed[r.box[1]:r.box[3], r.box[0]:r.box[2]].mean() < CHANGED_SHARE:
            continue
        size = (r.box[2] - r.box[0]) * (r.box[3] - r.box[1])
        if any(o.type == r.type and _overlap(o.box, r.box) > 0.3 * size for o in old):
            continue
        if area is not None and area[r.box[1]:r.box[3], r.box[0]:r.box[2]].mean() >= EXPLAINED:
            continue
        out.append(r)
    return out


def lost_detail(before: np.ndarray, after: np.ndarray, area: np.ndarray | None) -> list[Region]:
    """Places outside `area` where `after` lost most of the fine detail `before` had: a blur the step spread
    beyond its own pixels. With the picture before the step at hand this is judged against it, tile by tile,
    so even a blur that flattens fine texture entirely (which no-reference measures read as a flat place)
    is caught."""
    import cv2
    from scipy import ndimage

    from .distortion_tiles import TileGrid, _luma, _pooled, tile_side
    from .grounded_quality import MIN_TILES

    h, w = before.shape[:2]
    t = tile_side(h, w)
    grid = TileGrid(t, -(-h // t), -(-w // t), h, w)
    energy = [_pooled(cv2.Laplacian(_luma(im), cv2.CV_32F) ** 2, grid) for im in (before, after)]
    ratio = energy[1] / np.maximum(energy[0], 1e-12)
    lost = (energy[0] > DETAIL) & (ratio < KEPT)
    if area is not None:
        lost &= _pooled(area.astype(np.float32), grid) < EXPLAINED
    labels, _ = ndimage.label(lost, structure=np.ones((3, 3)))
    out = []
    for k, (rows, cols) in enumerate(ndimage.find_objects(labels), 1):
        tiles = labels == k
        if tiles.sum() >= MIN_TILES:
            severity = float(np.clip(1.0 - ratio[tiles].mean(), 0.05, 1.0))
            out.append(Region("blur", grid.box(rows.start, cols.start, rows.stop, cols.stop), severity))
    return out


def step_area(shape: tuple[int, int], masks: list, boxes: list) -> np.ndarray | None:
    """The pixels a step was asked to change: its masks and text boxes, grown by GROW; None when it has none."""
    import cv2

    area = np.zeros(shape, bool)
    for m in masks:
        if m is not None and np.shape(m) == shape:
            area |= np.asarray(m, bool)
    for b in boxes:
        x0, y0, x1, y1 = (int(v) for v in b[:4])
        area[max(0, y0):y1, max(0, x0):x1] = True
    if not area.any():
        return None
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * GROW + 1, 2 * GROW + 1))
    return cv2.dilate(area.astype(np.uint8), kernel).astype(bool)


def artifact_free(before: np.ndarray, after: np.ndarray, kind: str, masks: list, boxes: list) -> float:
    """1.0 when the step added no unexplained artifact, else 1 - the worst new artifact's severity."""
    if kind in UNJUDGED or not isinstance(after, np.ndarray) or after.shape != before.shape:
        return 1.0
    if np.array_equal(before, after):
        return 1.0
    area = step_area(before.shape[:2], masks, boxes)
    found = new_artifacts(before, after, area) + lost_detail(before, after, area)
    return 1.0 - max((r.severity for r in found), default=0.0)

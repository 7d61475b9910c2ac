"""Stage "fill": repaint a region with what should be behind it (object removal and replacement, text removal
and replacement). The region is the located mask, else the union of the text boxes an earlier stage found,
grown by GROW_PX so that anti-aliased edges leave no halo.

- `inpaint_telea`, `inpaint_ns`: OpenCV's inpainting (Telea's fast marching, Navier-Stokes). Smooth fills;
  good on uniform and gradient backgrounds, a smear on stripes or checks.
- `fill_surround`: the region interpolated from its surrounding colours by push-pull (an image pyramid of the
  known pixels). The cheapest; a smooth fill, like inpainting on uniform or gradient backgrounds.
- `fill_offset_copy`: the region copied from the same image shifted by the offset whose ring of pixels best
  matches the region's own ring. Keeps periodic and noisy textures (stripes, checks, grain) that the smooth
  fills blur away; needs room in the image for a copy of the region.
"""

from __future__ import annotations

import cv2
import numpy as np

from .edit_base import EditError, EditState, EditTool, Subtask, register_edit_tool
from .features import delta_e_lab, kmeans, lab, require_image
from .fill_area import GROW_PX, fill_mask
from .quality import check_fill, dilate, ring, window

FILL_KINDS = ("remove", "replace", "text_remove", "text_replace")
INPAINT_RADIUS = 5
ALIEN_DE = 25.0  # a source pixel this far from every colour of the hole's ring is something else
MAX_ALIEN = 0.03  # fill_offset_copy refuses a source with more of those


def _done(state: EditState, image: np.ndarray, tool: str, **info) -> EditState:
    return state.evolve(image=image, info={**state.info, tool: {"grow_px": GROW_PX, **info}})


def _cv_inpaint(state: EditState, tool: str, flag: int) -> EditState:
    image = require_image(state, tool)
    region = fill_mask(state)
    if region.all():
        raise EditError(f"{tool}: the region covers the whole image; there is nothing to fill it from")
    # inpainting reads only pixels within its radius of the region: a crop around it gives the same fill
    win = window(region, 2 * INPAINT_RADIUS + 2)
    out = image.copy()
    out[win] = cv2.inpaint(np.ascontiguousarray(image[win]), region[win].astype(np.uint8) * 255, INPAINT_RADIUS, flag)
    return _done(state, np.where(region[..., None], out, image), tool, radius=INPAINT_RADIUS)


def inpaint_telea(state: EditState, subtask: Subtask) -> EditState:
    return _cv_inpaint(state, "inpaint_telea", cv2.INPAINT_TELEA)


def inpaint_ns(state: EditState, subtask: Subtask) -> EditState:
    return _cv_inpaint(state, "inpaint_ns", cv2.INPAINT_NS)


def push_pull(image: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Every unknown pixel from the known ones around it: average the known pixels down a pyramid until each
    level is covered, then fill each finer level's unknown pixels from the coarser one (bilinear)."""
    levels = [(image.astype(np.float32), known.astype(np.float32))]
    while levels[-1][1].min() <= 0 and min(levels[-1][1].shape) > 1:
        img, w = levels[-1]
        size = (max(1, img.shape[1] // 2), max(1, img.shape[0] // 2))
        ws = cv2.resize(w, size, interpolation=cv2.INTER_AREA)
        sums = cv2.resize(img * w[..., None], size, interpolation=cv2.INTER_AREA)
        levels.append((np.where(ws[..., None] > 0, sums / np.maximum(ws, 1e-6)[..., None], 0),
                       (ws > 0).astype(np.float32)))
    img = levels[-1][0]
    for fine, w in reversed(levels[:-1]):
        up = cv2.resize(img, (fine.shape[1], fine.shape[0]), interpolation=cv2.INTER_LINEAR)
        img = np.where(w[..., None] > 0, fine, up)
    return np.clip(img + 0.5, 0, 255).astype(np.uint8)


def fill_surround(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "fill_surround")
    region = fill_mask(state)
    if region.all():
        raise EditError("fill_surround: the region covers the whole image; there is nothing to fill it from")
    filled = push_pull(image, ~region)
    return _done(state, np.where(region[..., None], filled, image), "fill_surround")


# ---- copying from an offset ------------------------------------------------------------------------------

def _offset_costs(L: np.ndarray, ring_yx, region_yx, offsets: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """For each (dy, dx) of `offsets` (C×2), how well the image shifted by it fits the hole: the shifted ring
    against the hole's ring (mean ΔE over the samples that stay in the image), plus a penalty for
    source pixels unlike the ring's colours (another object would be copied in)."""
    h, w = L.shape[:2]
    dy, dx = offsets[:, :1], offsets[:, 1:]
    ry, rx = ring_yx
    ty, tx = ry[None] + dy, rx[None] + dx
    inside = (ty >= 0) & (ty < h) & (tx >= 0) & (tx < w)
    diff = delta_e_lab(L[np.clip(ty, 0, h - 1), np.clip(tx, 0, w - 1)], L[ry, rx][None])
    ring_cost = (diff * inside).sum(1) / np.maximum(inside.sum(1), 1)
    sy, sx = region_yx
    src = L[sy[None] + dy, sx[None] + dx]
    alien = (np.min([delta_e_lab(src, c) for c in centres], axis=0) > ALIEN_DE).mean(1)
    cost = ring_cost + 60.0 * alien
    cost[inside.mean(1) < 0.5] = np.inf  # too little of the ring to compare
    return cost


def best_offset(L: np.ndarray, region: np.ndarray) -> tuple[int, int]:
    """The shift (dy, dx) to copy the hole from: a coarse grid up to 2.5 hole sizes away, then a one-pixel
    search around the best (periodic textures need the exact phase). The source never overlaps the hole."""
    h, w = region.shape
    ys, xs = np.nonzero(region)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    bh, bw = y1 - y0, x1 - x0
    rg = ring(region, int(np.clip(0.2 * max(bh, bw), 4, 16)))
    ry, rx = np.nonzero(rg)
    rng = np.random.default_rng(0)  # samples keep the search cheap; seeded, so a fill repeats
    pick = rng.choice(len(ry), min(len(ry), 500), replace=False)
    ring_yx = (ry[pick], rx[pick])
    pick = rng.choice(len(ys), min(len(ys), 250), replace=False)
    region_yx = (ys[pick], xs[pick])
    band = L[rg]
    centres, _ = kmeans(band[:: max(1, len(band) // 2000)], 3)

    def valid(offsets: np.ndarray) -> np.ndarray:
        dy, dx = offsets[:, 0], offsets[:, 1]
        inside = (y0 + dy >= 0) & (y1 + dy <= h) & (x0 + dx >= 0) & (x1 + dx <= w)
        return offsets[inside & ((np.abs(dy) >= bh) | (np.abs(dx) >= bw))]

    step = max(2, max(bh, bw) // 8)
    ry_, rx_ = int(2.5 * bh) + step, int(2.5 * bw) + step
    grid = np.stack(np.meshgrid(np.arange(-ry_, ry_ + 1, step), np.arange(-rx_, rx_ + 1, step), indexing="ij"), -1)
    coarse = valid(grid.reshape(-1, 2))
    if not len(coarse):
        raise EditError(f"fill_offset_copy: the region ({bw}×{bh} px) leaves no room in the {w}×{h} image "
                        f"for a copy of it")
    costs = _offset_costs(L, ring_yx, region_yx, coarse, centres)
    if not np.isfinite(costs).any():
        raise EditError("fill_offset_copy: no offset keeps enough of the region's surroundings in the image")
    best = coarse[int(costs.argmin())]
    while step > 1:  # refine around the best: a quarter of the step each time, down to one pixel
        fine_step = max(1, step // 4)
        r = np.arange(-step, step + 1, fine_step)
        near = valid(best + np.stack(np.meshgrid(r, r, indexing="ij"), -1).reshape(-1, 2))
        best = near[int(_offset_costs(L, ring_yx, region_yx, near, centres).argmin())]
        step = fine_step
    src = L[ys + best[0], xs + best[1]]
    alien = float((np.min([delta_e_lab(src, c) for c in centres], axis=0) > ALIEN_DE).mean())
    if alien > MAX_ALIEN:  # every place the hole could be copied from holds something else
        raise EditError(f"fill_offset_copy: no clean area to copy the {bw}×{bh} px region from: the best one "
                        f"holds {alien:.0%} of colours unlike the region's surroundings")
    return int(best[0]), int(best[1])


def fill_offset_copy(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "fill_offset_copy")
    region = fill_mask(state)
    dy, dx = best_offset(lab(image), region)
    out = image.copy()
    ys, xs = np.nonzero(region)
    out[ys, xs] = image[ys + dy, xs + dx]
    # a one-pixel seam blend: the copy's edge meets the ring without a visible step
    seam = dilate(region, 1) & ~cv2.erode(region.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    blurred = cv2.GaussianBlur(out, (3, 3), 0)
    out[seam] = blurred[seam]
    return _done(state, out, "fill_offset_copy", offset=[int(dx), int(dy)])


# ---- registration (the first is the default of a fixed tool chain) -------------------------------------------

register_edit_tool(EditTool(
    name="inpaint_telea", stage="fill", kinds=FILL_KINDS, fn=inpaint_telea, check=check_fill, cost=0.02, quality=0.85,
    description="OpenCV Telea inpainting of the mask (or text boxes) grown 2 px; smooth, a smear on textures"))
register_edit_tool(EditTool(
    name="inpaint_ns", stage="fill", kinds=FILL_KINDS, fn=inpaint_ns, check=check_fill, cost=0.02, quality=0.85,
    description="OpenCV Navier-Stokes inpainting of the mask (or text boxes) grown 2 px"))
register_edit_tool(EditTool(
    name="fill_surround", stage="fill", kinds=FILL_KINDS, fn=fill_surround, check=check_fill, cost=0.01, quality=0.8,
    description="push-pull interpolation of the surrounding colours; the cheapest, for uniform backgrounds"))
register_edit_tool(EditTool(
    name="fill_offset_copy", stage="fill", kinds=FILL_KINDS, fn=fill_offset_copy, check=check_fill, cost=0.05,
    quality=0.85, description="copies the region from the offset whose ring matches best; keeps stripes and grain"))

"""Stages "locate" (the object a recolor, remove or replace is about) and "foreground" (what a background
change keeps), with OpenCV: state.mask becomes the target.

locate
- `color_segment`: the pixels named the target's colour (nearest of COLORS in CIELAB, so black, white and
  gray work like any hue), their connected blobs, and of those the one shaped most like the target's shape
  (else the largest). Needs a colour in the target.
- `shape_segment`: the blobs that stand out from the background (the border's colours, so stripes, checks
  and gradients are background too), classified by contour; the one most like the target's shape, weighted
  by its colour when one is named. Works when the target names no colour.
- `hue_segment`: the pixels of the target colour's hue (CIELAB hue angle within features.HUE_TOL, chroma
  enough to have a hue) at any lightness, so the shaded and shadowed parts of a real object stay in it where
  colour naming calls them "brown" or "black"; cut along steep colour edges (shading is smooth, so a
  background of a near hue beside the object stays out); the blob picked as color_segment does. Enclosed
  pixels that are lit but colourless (a spoon lying on a saucer, a specular highlight) are left out. Needs a
  chromatic target colour (black, white and gray have no hue: color_segment).
- `grabcut_segment`: GrabCut seeded by one of the estimates above (definite foreground inside it, probable
  around it): edges that follow the object where colour naming is ragged (shading, texture).
Each mask is refined the same way: holes filled, and the anti-aliased rim added where its pixels are nearer
the object's colour than the background's.

foreground
- `border_key_foreground`: the background is every pixel of a border colour connected to the image border;
  the foreground is the rest.
- `grabcut_foreground`: GrabCut from the border (definite background) and that estimate (probable foreground).
"""

from __future__ import annotations

import cv2
import numpy as np

from .edit_base import COLORS, SHAPES, EditError, EditState, EditTool, Subtask, Target, register_edit_tool
from .features import (
    MIN_CHROMA,
    background_distance,
    background_model,
    blobs,
    candidate_blobs,
    delta_e_lab,
    fill_holes,
    foreground_mask,
    hue_chroma,
    hue_match,
    lab,
    min_blob_area,
    named_share,
    pick_blob,
    require_image,
    target_hue,
)
from .quality import check_foreground, check_locate, dilate, erode

LOCATE_KINDS = ("recolor", "remove", "replace")
MIN_SHAPE_SCORE = 0.15  # shape_segment's best blob must look at least this much like the shape
RECT_SIDE = 256  # grabcut_foreground without an estimate works at this size


def _target(subtask: Subtask, tool: str) -> Target:
    t = subtask.target
    if t is None or not t.name.strip():
        raise EditError(f"{tool}: subtask {subtask.id} ({subtask.kind}) names no target to locate")
    if t.color is not None and t.color not in COLORS:
        raise EditError(f"{tool}: unknown colour {t.color!r} in target {t.name!r}; known: {', '.join(COLORS)}")
    if t.shape is not None and t.shape not in SHAPES:
        raise EditError(f"{tool}: unknown shape {t.shape!r} in target {t.name!r}; known: {', '.join(SHAPES)}")
    return t


def refine(L: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The blob's holes filled and its anti-aliased rim added: a rim pixel joins when it is nearer the
    object's median colour than the median colour of the band just outside."""
    mask = fill_holes(cv2.morphologyEx(mask.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8)).astype(bool))
    rim = dilate(mask, 1) & ~mask
    outside = dilate(mask, 4) & ~dilate(mask, 2)
    core = erode(mask, 1)
    if rim.any() and outside.any() and core.any():
        obj, out = np.median(L[core], 0), np.median(L[outside], 0)
        px = L[rim]
        mask = mask.copy()
        mask[rim] = delta_e_lab(px, obj) < delta_e_lab(px, out)
    return mask


def _located(state: EditState, tool: str, L: np.ndarray, mask: np.ndarray, post=None, **info) -> EditState:
    """The refined mask (then `post(mask)`, when given) as the state's mask, its box and area in the info."""
    mask = refine(L, mask)
    if post is not None:
        mask = post(mask)
    ys, xs = np.nonzero(mask)
    box = [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]
    return state.evolve(mask=mask, info={**state.info, tool: {"box": box, "area": int(mask.sum()), **info}})


def color_estimate(image: np.ndarray, L: np.ndarray, target: Target, tool: str):
    """The blob of the target's colour that best fits its shape: (mask, number of blobs of that colour, score)."""
    if not target.color:
        raise EditError(f"{tool}: {target.name!r} names no colour (shape_segment finds objects by shape)")
    cands = candidate_blobs(image, L, target.color)
    if not cands:
        raise EditError(f"{tool}: no {target.color} pixels found for {target.name!r}")
    blob, score = pick_blob(cands, target.shape)
    return blob.mask, len(cands), score


def shape_estimate(image: np.ndarray, L: np.ndarray, target: Target, tool: str):
    """The foreground blob most like the target's shape (and colour): (mask, number of blobs, score)."""
    if not target.shape:
        raise EditError(f"{tool}: {target.name!r} names no shape of {', '.join(SHAPES)}")
    cands = candidate_blobs(image, L, None)
    if not cands:
        raise EditError(f"{tool}: nothing in the image stands out from the background to be {target.name!r}")
    # the colour, when named, decides between blobs of the same shape
    weight = (lambda b: 0.3 + 0.7 * named_share(image[b.mask], target.color)) if target.color else None
    blob, score = pick_blob(cands, target.shape, weight)
    if score < MIN_SHAPE_SCORE:
        raise EditError(f"{tool}: none of the {len(cands)} blobs looks like a {target.shape} for {target.name!r} "
                        f"(best score {score:.2f})")
    return blob.mask, len(cands), score


def color_segment(state: EditState, subtask: Subtask) -> EditState:
    image, target = require_image(state, "color_segment"), _target(subtask, "color_segment")
    L = lab(image)
    mask, n, score = color_estimate(image, L, target, "color_segment")
    return _located(state, "color_segment", L, mask, blobs=n, shape_score=round(score, 3))


def shape_segment(state: EditState, subtask: Subtask) -> EditState:
    image, target = require_image(state, "shape_segment"), _target(subtask, "shape_segment")
    L = lab(image)
    mask, n, score = shape_estimate(image, L, target, "shape_segment")
    return _located(state, "shape_segment", L, mask, blobs=n, shape_score=round(score, 3))


LIT_L = 20.0  # an enclosed colourless pixel at least this light is something else, not the object in shadow
EDGE_DE = 15.0  # hue_segment's region does not grow across a colour edge steeper than this (ΔE over 2 px)


def lab_gradient(L: np.ndarray) -> np.ndarray:
    """The colour gradient: ΔE between the pixels 1 px either side (horizontally or vertically, the larger),
    after a σ = 1 px blur (JPEG noise)."""
    s = cv2.GaussianBlur(L, (0, 0), 1.0)
    g = np.zeros(L.shape[:2], np.float32)
    g[:, 1:-1] = delta_e_lab(s[:, 2:], s[:, :-2])
    g[1:-1] = np.maximum(g[1:-1], delta_e_lab(s[2:], s[:-2]))
    return g


def hue_segment(state: EditState, subtask: Subtask) -> EditState:
    image, target = require_image(state, "hue_segment"), _target(subtask, "hue_segment")
    if not target.color:
        raise EditError(f"hue_segment: {target.name!r} names no colour (shape_segment finds objects by shape)")
    if target_hue(target.color) is None:
        raise EditError(f"hue_segment: {target.color} has no hue (black, white and gray differ only in "
                        f"lightness); use color_segment for {target.name!r}")
    L = lab(image)
    hue = hue_match(L, target.color)
    # Shading is smooth, an object's edge is not: the region of the hue is cut along steep edges before its
    # blobs are taken, so that a background of a near hue beside the object (the wood in the saucer's shadow
    # in coffee.jpg: hue 39–45°, like the saucer's) stays out. On the photo the crockery's own gradient is
    # under 5 for 3/4 of its pixels; at 20 the shadowed wood still joined, at 15 it does not.
    smooth = hue & (lab_gradient(L) < EDGE_DE)
    m = cv2.morphologyEx(smooth.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    cands = blobs(m)
    if not cands:
        raise EditError(f"hue_segment: no pixels of {target.color}'s hue found for {target.name!r}")
    blob, score = pick_blob(cands, target.shape)
    own = m.astype(bool) & blob.mask  # the blob's own pixels (blobs() filled its holes)
    own |= hue & dilate(own, 2)  # its edge (steep, so cut above) back, where it has the hue
    _, chroma = hue_chroma(L)
    lit_colourless = (chroma < MIN_CHROMA) & (L[..., 0] >= LIT_L)

    def drop_enclosed(mask: np.ndarray) -> np.ndarray:
        # refine() fills every hole; a hole that is dark is the object in shadow (kept), one that is lit but
        # colourless lies on the object (a spoon, a label) or is a specular highlight: a recolor leaves it
        return mask & ~(lit_colourless & ~dilate(own, 1))

    return _located(state, "hue_segment", L, own | blob.mask, post=drop_enclosed, blobs=len(cands),
                    shape_score=round(score, 3))


def grabcut(image: np.ndarray, seed: np.ndarray, pad: int, iterations: int = 3) -> np.ndarray:
    """GrabCut in the seed's box grown by `pad`: the seed eroded is definite foreground, the seed (dilated)
    probable foreground, the rest of the box probable background and the box's edge definite background."""
    h, w = seed.shape
    ys, xs = np.nonzero(seed)
    x0, y0 = max(0, xs.min() - pad), max(0, ys.min() - pad)
    x1, y1 = min(w, xs.max() + 1 + pad), min(h, ys.max() + 1 + pad)
    crop, s = np.ascontiguousarray(image[y0:y1, x0:x1]), seed[y0:y1, x0:x1]
    gc = np.full(s.shape, cv2.GC_PR_BGD, np.uint8)
    gc[dilate(s, 2)] = cv2.GC_PR_FGD
    sure = erode(s, max(2, int(0.15 * np.sqrt(s.sum()))), keep_some=False)
    gc[sure] = cv2.GC_FGD
    edge = np.ones(s.shape, bool)
    edge[2:-2, 2:-2] = False
    gc[edge & ~s] = cv2.GC_BGD  # the box's edge, unless the object itself reaches the image border there
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    cv2.grabCut(crop, gc, None, bgd, fgd, iterations, cv2.GC_INIT_WITH_MASK)
    out = np.zeros((h, w), bool)
    out[y0:y1, x0:x1] = (gc == cv2.GC_FGD) | (gc == cv2.GC_PR_FGD)
    return out


def grabcut_segment(state: EditState, subtask: Subtask) -> EditState:
    image, target = require_image(state, "grabcut_segment"), _target(subtask, "grabcut_segment")
    L = lab(image)
    if target.color:
        seed, n, _ = color_estimate(image, L, target, "grabcut_segment")
        how = "colour"
    else:
        seed, n, _ = shape_estimate(image, L, target, "grabcut_segment")
        how = "shape"
    seed = fill_holes(seed)
    ys, xs = np.nonzero(seed)
    pad = int(max(8, 0.25 * max(np.ptp(ys) + 1, np.ptp(xs) + 1)))
    cut = grabcut(image, seed, pad)
    pieces = [b for b in blobs(cut, min_area=1, holes=True) if (b.mask & seed).any()]  # the piece(s) the seed is in
    if not pieces:
        raise EditError(f"grabcut_segment: GrabCut kept nothing of the {how} estimate of {target.name!r}")
    mask = max(pieces, key=lambda b: int((b.mask & seed).sum())).mask
    return _located(state, "grabcut_segment", L, mask, seeded_by=how, blobs=n)


# ---- the foreground ---------------------------------------------------------------------------------------

def border_connected_background(L: np.ndarray) -> np.ndarray:
    """The pixels of a border colour connected to the image border (through pixels of border colours)."""
    bg = background_model(L)
    like = (background_distance(L, bg) <= bg.threshold).astype(np.uint8)
    _, labels = cv2.connectedComponents(like, connectivity=4)
    edge = np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    return np.isin(labels, edge[edge > 0])  # label 0 is every pixel unlike the border


def _foreground_result(state: EditState, tool: str, fg: np.ndarray, **info) -> EditState:
    """The foreground without specks: pieces smaller than an object could be are dropped."""
    fg = cv2.morphologyEx(fg.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(fg, connectivity=8)
    big = np.nonzero(stats[:, cv2.CC_STAT_AREA] >= min_blob_area(fg.shape))[0]
    keep = np.isin(labels, big[big > 0])
    if not keep.any():
        raise EditError(f"{tool}: no foreground: everything looks like the colours at the image border")
    if keep.mean() > 0.95:
        raise EditError(f"{tool}: the foreground would be {keep.mean():.0%} of the image; "
                        "the border shows no background")
    return state.evolve(mask=keep, info={**state.info, tool: {"share": round(float(keep.mean()), 4), **info}})


def border_key_foreground(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "border_key_foreground")
    return _foreground_result(state, "border_key_foreground", ~border_connected_background(lab(image)))


def grabcut_foreground(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "grabcut_foreground")
    h, w = image.shape[:2]
    L = lab(image)
    estimate = foreground_mask(L)
    gc = np.full((h, w), cv2.GC_PR_BGD, np.uint8)
    gc[dilate(estimate, 3)] = cv2.GC_PR_FGD
    gc[erode(estimate, 3, keep_some=False)] = cv2.GC_FGD
    band = max(2, min(h, w) // 50)
    edge = np.ones((h, w), bool)
    edge[band:-band, band:-band] = False
    gc[edge & ~estimate] = cv2.GC_BGD
    work, scale = image, 1.0
    if not estimate.any():
        # no estimate: GrabCut's classic start, a rectangle inside the border. With nothing to seed it, it
        # converges slowly, so it runs on a copy at most RECT_SIDE px wide (its mask is scaled back)
        scale = min(1.0, RECT_SIDE / max(h, w))
        work = cv2.resize(image, (max(2, round(w * scale)), max(2, round(h * scale))), interpolation=cv2.INTER_AREA)
        sh, sw = work.shape[:2]
        gc = np.full((sh, sw), cv2.GC_BGD, np.uint8)
        gc[sh // 20:sh - sh // 20, sw // 20:sw - sw // 20] = cv2.GC_PR_FGD
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    try:
        cv2.grabCut(np.ascontiguousarray(work), gc, None, bgd, fgd, 2, cv2.GC_INIT_WITH_MASK)
    except cv2.error as err:  # GrabCut refuses a start with no foreground or background samples
        raise EditError(f"grabcut_foreground: GrabCut could not start: {err.msg.strip()}") from None
    fg = ((gc == cv2.GC_FGD) | (gc == cv2.GC_PR_FGD)).astype(np.float32)
    if scale < 1.0:
        fg = cv2.resize(fg, (w, h), interpolation=cv2.INTER_LINEAR)
    return _foreground_result(state, "grabcut_foreground", fg > 0.5, rectangle_start=not estimate.any())


# ---- registration (the first of a stage is the default of a fixed tool chain) --------------------------------

register_edit_tool(EditTool(
    name="color_segment", stage="locate", kinds=LOCATE_KINDS, fn=color_segment, check=check_locate, cost=0.03,
    quality=0.9, description="blob of the target's named colour (CIELAB), the one most like its shape"))
register_edit_tool(EditTool(
    name="shape_segment", stage="locate", kinds=LOCATE_KINDS, fn=shape_segment, check=check_locate, cost=0.03,
    quality=0.85, description="blob unlike the border's colours, classified by contour; works without a colour"))
register_edit_tool(EditTool(
    name="grabcut_segment", stage="locate", kinds=LOCATE_KINDS, fn=grabcut_segment, check=check_locate, cost=0.15,
    quality=0.9, description="GrabCut seeded by the colour (or shape) estimate; edges that follow the object"))
register_edit_tool(EditTool(
    name="hue_segment", stage="locate", kinds=LOCATE_KINDS, fn=hue_segment, check=check_locate, cost=0.03,
    quality=0.85, description="blob of the target colour's CIELAB hue at any lightness: shaded objects whole"))
register_edit_tool(EditTool(
    name="border_key_foreground", stage="foreground", kinds=("background",), fn=border_key_foreground,
    check=check_foreground, cost=0.02, quality=0.85,
    description="foreground = everything not of a border colour connected to the image border"))
register_edit_tool(EditTool(
    name="grabcut_foreground", stage="foreground", kinds=("background",), fn=grabcut_foreground,
    check=check_foreground, cost=0.6, quality=0.85,
    description="GrabCut from the image border (background) and the border-colour estimate (foreground)"))

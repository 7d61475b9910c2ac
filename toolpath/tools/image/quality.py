"""How well an edit step went, measured from the images alone: the `check` of every OpenCV edit tool.

One small function per idea, each a score in [0, 1]; each stage's check combines a few of them (stage checks
at the bottom). They never see ground truth: only the state before the step, the state after it, and the
subtask. They are pixel measures, cheap enough to run after every step of an A* search (a few ms on a
512×384 image); none runs OCR — a text step is judged by its ink (pixels that contrast with the background
around them), not by reading it, because an OCR read costs 0.2–0.5 s and needs an engine the machine may lack.

Colour words and distances are features.py's (nearest of edit_base.COLORS in CIELAB, ΔE76).
"""

from __future__ import annotations

import functools
import math

import cv2
import numpy as np

from .edit_base import COLORS, POSITIONS, SHAPES, EditState, Subtask, text_query
from .features import (
    HUE_TOL,
    NAMES,
    Background,
    background_distance,
    background_model,
    blobs,
    border_band,
    color_lab,
    color_mask,
    color_names,
    delta_e_lab,
    distance_to,
    hue_match,
    kmeans,
    lab,
    mask_box,
    named_share,
    shape_box,
    shape_coverage,
    shape_score,
)
from .fill_area import fill_mask

INK_DE = 30.0  # a pixel this far (ΔE) from the background around it is ink
UNCHANGED = 12  # a pixel whose channels all moved less than this is unchanged (JPEG-free, so tight)
MIN_MASK_PX = 16
MAX_MASK_FRAC = 0.9


def _disk(r: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))


def dilate(mask: np.ndarray, r: int) -> np.ndarray:
    return cv2.dilate(mask.astype(np.uint8), _disk(r)).astype(bool) if r > 0 else mask.astype(bool)


def erode(mask: np.ndarray, r: int, keep_some: bool = True, min_pixels: int = 1) -> np.ndarray:
    """The mask eroded by r px; with keep_some, the mask itself when erosion would leave fewer than
    `min_pixels` pixels (by default: nothing)."""
    out = cv2.erode(mask.astype(np.uint8), _disk(r)).astype(bool) if r > 0 else mask.astype(bool)
    return mask.astype(bool) if keep_some and int(out.sum()) < min_pixels else out


def ring(mask: np.ndarray, r: int | None = None) -> np.ndarray:
    """The band of pixels around a mask (r px wide; by default scaled to the mask's size, 4..24 px)."""
    if r is None:
        r = int(np.clip(0.25 * math.sqrt(mask.sum()), 4, 24))
    return dilate(mask, r) & ~mask


def _same_shape(before: EditState, after: EditState) -> bool:
    return isinstance(after.image, np.ndarray) and after.image.shape == before.image.shape


# ---- masks ------------------------------------------------------------------------------------------------

def mask_plausibility(mask: np.ndarray | None, shape: tuple[int, int]) -> float:
    """1 for a mask of a sensible size; 0 when missing, mis-sized, a speck, or (nearly) the whole image."""
    if mask is None or getattr(mask, "shape", None) != shape:
        return 0.0
    frac = float(mask.mean())
    if mask.sum() < MIN_MASK_PX or frac >= MAX_MASK_FRAC:
        return 0.0
    return 1.0 if frac <= 0.5 else (MAX_MASK_FRAC - frac) / (MAX_MASK_FRAC - 0.5)


def mask_solidity(mask: np.ndarray) -> float:
    """The share of the mask in its largest connected piece: a target is one blob, not scattered pixels."""
    pieces = blobs(mask, min_area=1, most=1, holes=True)
    return pieces[0].area / max(int(mask.sum()), 1) if pieces else 0.0


def color_coherence(image: np.ndarray, mask: np.ndarray, color: str, image_lab: np.ndarray | None = None) -> float:
    """The share of the mask (its anti-aliased rim left out) named `color` or of its hue (features.hue_match:
    the shaded part of a real object is named "brown" or "black" but keeps the hue; in the darkest shadows,
    where the hue drifts, within twice the tolerance)."""
    core = erode(mask, 1)
    if not core.any():
        return 0.0
    L = lab(image) if image_lab is None else image_lab
    ok = (color_names(image[core]) == NAMES.index(color)) | hue_match(L[core], color, dark_tol=2 * HUE_TOL)
    return float(ok.mean())


CONTINUE_DE = 20.0  # an outside pixel this near (ΔE) the mask's colour beside it continues the object
CONTINUE_WIN = 13  # px: the window in which "the mask's colour beside it" is averaged


def continuation(image_lab: np.ndarray, mask: np.ndarray, color: str) -> float:
    """The share of the band just outside the mask (2–4 px out, past the anti-aliased rim) where the object
    goes on: pixels of the target's hue (hue_match) whose colour is near (ΔE < CONTINUE_DE) the mask's own
    colour beside them (the mean of its inner band in a CONTINUE_WIN window). A mask cut through a shading
    gradient (color_segment on a shaded object) has much of its edge there; one that follows the object's
    edge has next to none: another object of the same hue but a different colour (orange on brown) differs by
    more than CONTINUE_DE, and a nearly grey background (the benchmark's) has no hue. 0 for achromatic colours."""
    inside = mask & ~erode(mask, 2, keep_some=False)
    out = dilate(mask, 4) & ~dilate(mask, 1)
    if not inside.any() or not out.any():
        return 0.0
    ys, xs = np.nonzero(out)  # only the mask's neighbourhood is filtered
    pad = CONTINUE_WIN
    y0, y1 = max(0, ys.min() - pad), min(mask.shape[0], ys.max() + 1 + pad)
    x0, x1 = max(0, xs.min() - pad), min(mask.shape[1], xs.max() + 1 + pad)
    L, ins, o = image_lab[y0:y1, x0:x1], inside[y0:y1, x0:x1].astype(np.float32), out[y0:y1, x0:x1]
    k = (CONTINUE_WIN, CONTINUE_WIN)
    weight = cv2.boxFilter(ins, -1, k, normalize=False)
    beside = np.stack([cv2.boxFilter(L[..., i] * ins, -1, k, normalize=False) for i in range(3)], -1)
    beside = beside[o] / np.maximum(weight[o], 1e-6)[:, None]
    near = (weight[o] > 0) & (delta_e_lab(L[o], beside) < CONTINUE_DE)
    return float((near & hue_match(L[o], color)).mean())


def shape_match(mask: np.ndarray, shape: str) -> float:
    return shape_score(mask, shape)


def boundary_contrast(image_lab: np.ndarray, mask: np.ndarray) -> float:
    """ΔE between the median colours just inside and just outside the mask's edge, as a 0..1 score (25 → 1):
    a mask that follows an object's edge has contrast there; one cut through flat colour has none."""
    inside = mask & ~erode(mask, 2, keep_some=False)
    outside = dilate(mask, 3) & ~dilate(mask, 1)
    if not inside.any() or not outside.any():
        return 0.0
    d = float(delta_e_lab(np.median(image_lab[inside], 0), np.median(image_lab[outside], 0)))
    return min(1.0, d / 25.0)


# ---- pixels that should not have moved ----------------------------------------------------------------------

def unchanged_outside(before: np.ndarray, after: np.ndarray, region: np.ndarray, allowed: float = 0.02) -> float:
    """1 when nothing outside `region` changed; falls linearly to 0 when `allowed` of those pixels changed."""
    outside = ~region
    if not outside.any():
        return 1.0
    moved = (np.abs(before.astype(np.int16) - after.astype(np.int16)).max(-1) >= UNCHANGED)[outside]
    return float(max(0.0, 1.0 - moved.mean() / allowed))


# ---- colour after a recolor ---------------------------------------------------------------------------------

def target_color_share(image: np.ndarray, mask: np.ndarray, color: str) -> float:
    """The share of the mask (eroded 2 px, as the edge blends into the background) named `color`."""
    return named_share(image[erode(mask, 2)], color)


def texture_kept(before: np.ndarray, after: np.ndarray, mask: np.ndarray) -> float:
    """Shading and texture kept: the correlation of the luminance inside the mask (rim left out) before and
    after; 1 when the region had no variation to keep. (Luminance itself rather than its gradients: a smooth
    shading ramp has gradients no larger than 8-bit rounding noise, so their correlation says nothing.)"""
    core = erode(mask, 1)
    l0, l1 = (cv2.blur(lab(im)[..., 0], (3, 3))[core] for im in (before, after))
    if l0.std() < 0.5:  # flat before: nothing to keep (L is 0..100; 0.5 is invisible)
        return 1.0
    if l1.std() < 1e-6:
        return 0.0
    return float(max(0.0, np.corrcoef(l0, l1)[0, 1]))


# ---- a filled region ---------------------------------------------------------------------------------------------

def surround_model(image_lab: np.ndarray, region: np.ndarray) -> Background | None:
    """The colours of the ring around `region` (up to three clusters): what the fill should look like."""
    band = image_lab[ring(region)]
    if len(band) < 8:
        return None
    if len(band) > 3000:
        band = band[:: len(band) // 3000 + 1]
    centres, _ = kmeans(band, 3)
    near = np.min([distance_to(band, c) for c in centres], axis=0)
    return Background(centres, float(band.std(0).mean()), max(20.0, 2.0 * float(np.percentile(near, 95)) + 4.0))


def residue(after: np.ndarray, region: np.ndarray) -> float:
    """The share of the region whose colour is unlike every colour of the ring around it (what the fill left
    of the object or the text's ink); 1 when the region has no surrounding."""
    L = lab(after)
    model = surround_model(L, region)
    if model is None or not region.any():
        return 1.0
    return float((background_distance(L[region][:, None, :], model)[:, 0] > model.threshold).mean())


def ring_likeness(after: np.ndarray, region: np.ndarray) -> float:
    """How much the region's colour statistics match the ring's: the mean (ΔE 0 → 1, 30 → 0) and the spread
    (a smear of a textured background has a much smaller spread than its ring)."""
    L = lab(after)
    rg = ring(region)
    if not rg.any() or not region.any():
        return 0.0
    inner, outer = L[region], L[rg]
    mean_score = max(0.0, 1.0 - float(delta_e_lab(inner.mean(0), outer.mean(0))) / 30.0)
    s_in, s_out = float(inner.std(0).mean()), float(outer.std(0).mean())
    spread = min(s_in + 1.0, s_out + 1.0) / max(s_in + 1.0, s_out + 1.0)
    return mean_score * (0.8 + 0.2 * spread)


def color_gone(after: np.ndarray, region: np.ndarray, color: str) -> float:
    """1 when (beyond what the ring itself has) ≤ 2 % of the region is still named `color`, 0 at ≥ 12 %."""
    rg = ring(region)
    left = named_share(after[region], color) - (named_share(after[rg], color) if rg.any() else 0.0)
    return float(np.clip(1.0 - (left - 0.02) / 0.10, 0.0, 1.0))


# ---- drawn shapes and text --------------------------------------------------------------------------------------

def drawn_shape_match(after: np.ndarray, box, shape: str, color: str) -> float:
    """Near the box: the largest blob named `color` is `shape`, of the area and centre a shape drawn in the
    box should have (shape_box's convention)."""
    h, w = after.shape[:2]
    x0, y0, x1, y1 = box
    gx, gy = (x1 - x0) // 4 + 2, (y1 - y0) // 4 + 2
    X0, Y0, X1, Y1 = max(0, x0 - gx), max(0, y0 - gy), min(w, x1 + gx), min(h, y1 + gy)
    named = color_mask(after[Y0:Y1, X0:X1], color)
    pieces = blobs(named, min_area=8, most=1)
    if not pieces:
        return 0.0
    blob = pieces[0]
    sb = shape_box(shape, box)
    expected = float((shape_coverage(shape, sb, (h, w)) > 0.5).sum())
    area = min(blob.area, expected) / max(blob.area, expected, 1.0)
    bx0, by0, bx1, by1 = blob.box
    off = math.hypot((bx0 + bx1) / 2 + X0 - (sb[0] + sb[2]) / 2, (by0 + by1) / 2 + Y0 - (sb[1] + sb[3]) / 2)
    centred = max(0.0, 1.0 - off / (0.25 * max(sb[2] - sb[0], sb[3] - sb[1], 1)))
    return shape_score(blob.mask, shape) * math.sqrt(area) * (0.5 + 0.5 * centred)


def ink_mask(after: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Pixels that a write step turned into ink: ΔE > INK_DE from what was there before."""
    return delta_e_lab(lab(after), lab(before)) > INK_DE


@functools.lru_cache(maxsize=256)
def _text_ink_size(text: str) -> tuple[int, int]:
    """(width, height) of `text`'s ink in the writing font at size 64, measured on a rendering (pixels over
    40 % covered, as INK_DE sees anti-aliased edges): the font's own box includes side bearings."""
    from PIL import Image, ImageDraw

    from .fonts import font

    f = font(64)
    left, t, r, b = f.getbbox(text)
    im = Image.new("L", (r - left + 8, b - t + 8), 0)
    ImageDraw.Draw(im).text((4 - left, 4 - t), text, font=f, fill=255)
    ink = np.asarray(im) > 102
    if not ink.any():
        return 1, 1
    ys, xs = np.nonzero(ink)
    return int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)


def text_aspect(text: str) -> float:
    """Width / height of `text`'s ink in the writing font (text.py's): what a written line should measure."""
    w, h = _text_ink_size(text)
    return w / h


def text_height(text: str) -> float:
    """The ink height of `text` in the writing font, relative to the font size."""
    return _text_ink_size(text)[1] / 64.0


def line_geometry(ink: np.ndarray, text: str) -> float:
    """The ink forms one line of `text`: its box's aspect matches the text's (log-ratio, σ 0.3)."""
    if ink.sum() < 10 or not text:
        return 0.0
    x0, y0, x1, y1 = mask_box(ink)
    got = (x1 - x0) / max(y1 - y0, 1)
    return math.exp(-0.5 * (math.log(got / max(text_aspect(text), 1e-3)) / 0.3) ** 2)


def position_cell(position: str, width: int, height: int) -> tuple[int, int, int, int]:
    """The cell of a POSITIONS word in the image's 3×3 grid (x0, y0, x1, y1)."""
    i = POSITIONS.index(position)
    col, row = i % 3, i // 3
    return col * width // 3, row * height // 3, (col + 1) * width // 3, (row + 1) * height // 3


def ink_contrast(image: np.ndarray, ink: np.ndarray) -> float:
    """How readable the ink is: ΔE between its median colour and the pixels around it (50 → 1)."""
    if not ink.any():
        return 0.0
    L = lab(image)
    around = dilate(ink, 3) & ~dilate(ink, 1)
    if not around.any():
        return 0.0
    return min(1.0, float(delta_e_lab(np.median(L[ink], 0), np.median(L[around], 0))) / 50.0)


# ---- stage checks (EditTool.check) ------------------------------------------------------------------------------

CONTINUE_FREE = 0.05  # this much of a mask's outer band may look like the object going on (noise, a highlight)
CONTINUE_ZERO = 0.30  # …and with this much more the mask scores 0: it is a piece of the object


def check_locate(before: EditState, after: EditState, subtask: Subtask) -> float:
    """A plausible, solid mask; made of the target's colour and shaped like its shape when it names them; and,
    for a colour with a hue, complete: the object does not go on past its edge (continuation)."""
    mask = after.mask
    q = mask_plausibility(mask, before.image.shape[:2])
    if q == 0.0:
        return 0.0
    mask = mask.astype(bool)
    q *= mask_solidity(mask)
    target = subtask.target
    if target and target.color in COLORS:
        L = lab(before.image)
        q *= float(np.clip((color_coherence(before.image, mask, target.color, L) - 0.4) / 0.5, 0.0, 1.0))
        # 0 for achromatic colours (hue_match finds nothing), so black, white and gray are judged as before
        cont = continuation(L, mask, target.color)
        q *= float(np.clip(1.0 - (cont - CONTINUE_FREE) / CONTINUE_ZERO, 0.0, 1.0))
    if target and target.shape in SHAPES:
        q *= 0.5 + 0.5 * shape_match(mask, target.shape)
    if not (target and (target.color in COLORS or target.shape in SHAPES)):
        q *= boundary_contrast(lab(before.image), mask)
    return float(q)


def check_recolor(before: EditState, after: EditState, subtask: Subtask) -> float:
    """The masked object is now the target colour, its shading kept, and nothing else moved."""
    color = subtask.params.get("color")
    if not _same_shape(before, after) or before.mask is None or color not in COLORS:
        return 0.0
    mask = before.mask.astype(bool)
    share = min(1.0, target_color_share(after.image, mask, color) / 0.9)
    return share * (0.7 + 0.3 * texture_kept(before.image, after.image, mask)) * \
        unchanged_outside(before.image, after.image, dilate(mask, 2))


def fill_region(state: EditState) -> np.ndarray | None:
    """What a fill step repaints (the mask, else the text boxes; see fill.py), or None when there is none."""
    try:
        return fill_mask(state, grow=0)
    except Exception:  # noqa: BLE001 — a check scores, it does not raise: no region means a score of 0
        return None


def window(mask: np.ndarray, pad: int) -> tuple[slice, slice]:
    """The slices of the mask's bounding box grown by `pad` (clipped to the image)."""
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    return (slice(max(0, ys.min() - pad), min(h, ys.max() + 1 + pad)),
            slice(max(0, xs.min() - pad), min(w, xs.max() + 1 + pad)))


def check_fill(before: EditState, after: EditState, subtask: Subtask) -> float:
    """Nothing of the object or text is left (no colour unlike the surroundings, the target colour gone), the
    region looks like its ring, and only the region changed."""
    region = fill_region(before)
    if region is None or not region.any() or not _same_shape(before, after):
        return 0.0
    win = window(region, 30)  # every measure but the last is local: the ring is at most 24 px wide
    img, reg = after.image[win], region[win]
    q = max(0.0, 1.0 - residue(img, reg) / 0.25)
    q *= ring_likeness(img, reg)
    color = subtask.target.color if subtask.target else None
    if subtask.kind in ("remove", "replace") and color in COLORS:
        q *= color_gone(img, reg, color)
    return q * unchanged_outside(before.image, after.image, dilate(region, 3))


def check_draw(before: EditState, after: EditState, subtask: Subtask) -> float:
    """A blob of the new colour and shape fills the old object's box; nothing outside the box moved much."""
    shape, color = subtask.params.get("shape"), subtask.params.get("color")
    if not _same_shape(before, after) or before.mask is None or shape not in SHAPES or color not in COLORS:
        return 0.0
    box = mask_box(before.mask) if before.mask.any() else None
    if box is None:
        return 0.0
    h, w = before.image.shape[:2]
    region = np.zeros((h, w), bool)
    x0, y0, x1, y1 = box
    region[max(0, y0 - 3):y1 + 3, max(0, x0 - 3):x1 + 3] = True
    return drawn_shape_match(after.image, box, shape, color) * unchanged_outside(before.image, after.image, region)


def check_find_text(before: EditState, after: EditState, subtask: Subtask) -> float:
    """Text-like boxes were found (each ink of one line that contrasts with its background, no box a large
    part of the image); when the subtask names the text, every box has that text's shape (its aspect in the
    writing font): a box of another text would be erased too."""
    boxes, mask = after.text_boxes, after.mask
    h, w = before.image.shape[:2]
    if not boxes or mask is None or mask.shape != (h, w) or not mask.any() or float(mask.mean()) > 0.3:
        return 0.0
    q = 0.5 + 0.5 * ink_contrast(before.image, erode(mask.astype(bool), 1))
    query = text_query(subtask)
    if query:
        q *= min(box_text_match(b, query) for b in boxes)
    return float(q)


def case_variants(text: str) -> tuple[str, ...]:
    """The text as given, in capitals, in small letters and capitalised: the forms an image may show it in
    (a subtask's text matches case-insensitively)."""
    return tuple(dict.fromkeys((text, text.upper(), text.lower(), text.capitalize())))


def box_text_match(box, text: str) -> float:
    """How well a box's aspect fits `text` written in one line, in its best case form (log-ratio, σ 0.25)."""
    x0, y0, x1, y1 = (int(v) for v in box[:4])
    got = max((x1 - x0) / max(y1 - y0, 1), 1e-3)
    return max(math.exp(-0.5 * (math.log(got / max(text_aspect(t), 1e-3)) / 0.25) ** 2) for t in case_variants(text))


def check_write(before: EditState, after: EditState, subtask: Subtask) -> float:
    """New ink forms one readable line of the text, where it should be: the removed text's box for a
    replacement (the same height, the same left edge), the position's cell for an addition."""
    text = subtask.params.get("text")
    if not _same_shape(before, after) or not isinstance(text, str) or not text.strip():
        return 0.0
    ink = ink_mask(after.image, before.image)
    if ink.sum() < 10:
        return 0.0
    q = line_geometry(ink, text.strip()) * (0.5 + 0.5 * ink_contrast(after.image, ink))
    x0, y0, x1, y1 = mask_box(ink)
    h, w = before.image.shape[:2]
    if subtask.kind == "text_replace" and before.text_boxes:
        box = before.text_boxes[0]
        bx0, by0, bx1, by1 = (int(v) for v in box[:4])
        old = box[4] if len(box) > 4 and isinstance(box[4], str) and box[4].strip() else None
        # the new text at the old one's size: as tall as the old box, scaled by the two texts' heights
        want = (by1 - by0) * (text_height(text.strip()) / text_height(old) if old else 1.0)
        height = min(y1 - y0, want) / max(y1 - y0, want, 1)
        bh = max(by1 - by0, 1)
        left = float(np.clip(1.0 - (abs(x0 - bx0) - 0.15 * bh) / bh, 0.0, 1.0))  # glyphs' side bearings differ
        q *= height * (0.5 + 0.5 * left)
    elif subtask.kind == "text_add" and subtask.params.get("position") in POSITIONS:
        cx0, cy0, cx1, cy1 = position_cell(subtask.params["position"], w, h)
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        q *= 1.0 if (cx0 <= cx < cx1 and cy0 <= cy < cy1) else 0.0
    return float(q)


def check_foreground(before: EditState, after: EditState, subtask: Subtask) -> float:
    """A plausible foreground: it follows edges, holds little of the border's colours, and the image border is
    (mostly) outside it."""
    mask = after.mask
    q = mask_plausibility(mask, before.image.shape[:2])
    if q == 0.0:
        return 0.0
    mask = mask.astype(bool)
    L = lab(before.image)
    bg = background_model(L)
    inner = erode(mask, 2)
    bg_like = float((background_distance(L[inner][:, None, :], bg)[:, 0] <= bg.threshold).mean())
    on_border = float(border_band(mask[..., None].astype(np.uint8)).mean())
    return q * boundary_contrast(L, mask) * max(0.0, 1.0 - bg_like / 0.3) * (1.0 - on_border)


def check_background(before: EditState, after: EditState, subtask: Subtask) -> float:
    """Outside the foreground the image is the new colour (within ΔE 20); the foreground is kept."""
    color = subtask.params.get("color", "white")
    if not _same_shape(before, after) or before.mask is None or color not in COLORS:
        return 0.0
    mask = before.mask.astype(bool)
    outside = ~dilate(mask, 2)
    if not outside.any():
        return 0.0
    de = distance_to(lab(after.image[outside].reshape(-1, 1, 3)), color_lab(color))
    colored = float(np.clip((float((de <= 20.0).mean()) - 0.5) / 0.45, 0.0, 1.0))
    core = erode(mask, 2)
    kept = float((np.abs(after.image[core].astype(np.int16) - before.image[core].astype(np.int16)).max(-1)
                  < UNCHANGED).mean()) if core.any() else 0.0
    return colored * kept


def sharpness(image: np.ndarray) -> float:
    """Variance of the Laplacian of the luminance (a common focus measure)."""
    return float(cv2.Laplacian(lab(image)[..., 0], cv2.CV_32F).var())


def check_upscale(before: EditState, after: EditState, subtask: Subtask) -> float:
    """The size is the factor's, the image scaled back matches the input, and it is at least as sharp as a
    bilinear upscale (a much blurrier one scores lower; one oversharpened into halos too)."""
    try:
        f = float(subtask.params.get("factor", 2))
    except (TypeError, ValueError):
        return 0.0
    h, w = before.image.shape[:2]
    if not isinstance(after.image, np.ndarray) or after.image.shape != (round(h * f), round(w * f), 3):
        return 0.0
    down = cv2.resize(after.image, (w, h), interpolation=cv2.INTER_AREA)
    mad = float(np.abs(down.astype(np.int16) - before.image.astype(np.int16)).mean())
    fidelity = max(0.0, 1.0 - max(0.0, mad - 1.0) / 12.0)  # a non-integer factor never maps back exactly
    base = sharpness(cv2.resize(before.image, (after.image.shape[1], after.image.shape[0]),
                                interpolation=cv2.INTER_LINEAR))
    if base < 1e-6:
        return fidelity
    r = sharpness(after.image) / base
    sharp = min(1.0, r) if r <= 3.0 else 3.0 / r
    return fidelity * (0.6 + 0.4 * sharp)

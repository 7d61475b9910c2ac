"""What an image shows, measured cheaply: colour names, the background model, shape descriptors (the
precondition features learned subroutines test are built on these in preconditions.py).

The OpenCV edit tools (locate, fill, paint, text) and their checks (quality.py) are built on the measurements
here, so a tool and the check that judges it see colours and shapes the same way:

  * colours are named in CIELAB (ΔE76) by the nearest of edit_base.COLORS, the words the instructions use;
  * the background is what the image border shows: up to four colour clusters of a thin border band, so a
    striped, checkered or gradient background is "background" as well as a uniform one;
  * a blob's shape is scored from its contour (solidity, extent in its minimum-area rectangle, aspect).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import cv2
import numpy as np

from .edit_base import COLORS, SHAPES, EditError, EditState

NAMES = list(COLORS)
MAX_NAME_DE = 45.0  # a pixel farther than this from every named colour has no colour name
MIN_COMPONENT_FRAC = 0.0004  # blobs smaller than this share of the image are specks, not objects
MIN_COMPONENT_PX = 16
BORDER_PX = 4  # the band of the image border the background model is read from

# ---- input checks (every tool starts with these) -----------------------------------------------------

def require_image(state: EditState, tool: str) -> np.ndarray:
    im = state.image
    if not (isinstance(im, np.ndarray) and im.ndim == 3 and im.shape[2] == 3 and im.dtype == np.uint8
            and im.shape[0] >= 2 and im.shape[1] >= 2):
        got = f"{im.dtype} {im.shape}" if isinstance(im, np.ndarray) else type(im).__name__
        raise EditError(f"{tool}: the image must be H×W×3 uint8 RGB of at least 2×2 px, got {got}")
    return im


def require_color(name, tool: str, what: str = "colour") -> str:
    if not isinstance(name, str) or name.strip().lower() not in COLORS:
        raise EditError(f"{tool}: unknown {what} {name!r}; known: {', '.join(NAMES)}")
    return name.strip().lower()


def require_shape(name, tool: str) -> str:
    if not isinstance(name, str) or name.strip().lower() not in SHAPES:
        raise EditError(f"{tool}: unknown shape {name!r}; known: {', '.join(SHAPES)}")
    return name.strip().lower()


def require_mask(state: EditState, tool: str, what: str = "the located target") -> np.ndarray:
    h, w = state.image.shape[:2]
    m = state.mask
    if m is None:
        raise EditError(f"{tool}: needs {what} from an earlier stage, and there is no mask")
    if not isinstance(m, np.ndarray) or m.shape != (h, w):
        raise EditError(f"{tool}: the mask is {getattr(m, 'shape', type(m).__name__)}, the image {h}×{w}")
    m = m.astype(bool)
    if not m.any():
        raise EditError(f"{tool}: the mask of {what} is empty")
    return m


# ---- colour -------------------------------------------------------------------------------------------

def lab(rgb: np.ndarray) -> np.ndarray:
    """(…, 3) uint8 (or float 0..255) RGB → float32 CIELAB, L 0..100 (ΔE76 distances are then meaningful)."""
    a = np.asarray(rgb, np.float32) / np.float32(255.0)
    if a.ndim == 3:  # an image: converted as it is (a one-pixel-wide column is several times slower)
        return cv2.cvtColor(a, cv2.COLOR_RGB2Lab)
    return cv2.cvtColor(a.reshape(-1, 1, 3), cv2.COLOR_RGB2Lab).reshape(a.shape)


@functools.lru_cache(maxsize=1)
def palette_lab() -> np.ndarray:
    return lab(np.array([COLORS[n] for n in NAMES], np.float32))


def color_lab(color: str) -> np.ndarray:
    return palette_lab()[NAMES.index(color)]


NAME_BITS = 6  # colour names are looked up per RGB cell of 4×4×4 values: ΔE ≤ ~2 off, 10× faster than exact


@functools.lru_cache(maxsize=1)
def _name_table() -> tuple[np.ndarray, np.ndarray]:
    """For every RGB cell, the index of its nearest named colour (CIELAB) and the distance to it."""
    n = 1 << NAME_BITS
    step = 256 // n
    q = np.arange(n, dtype=np.float32) * step + (step - 1) / 2.0
    rgb = np.stack(np.meshgrid(q, q, q, indexing="ij"), -1).reshape(n * n, n, 3)
    L = lab(rgb).reshape(-1, 3)
    d = np.stack([delta_e_lab(L, p) for p in palette_lab()])
    return d.argmin(0).astype(np.int8), d.min(0).astype(np.float32)


def color_names(rgb: np.ndarray, max_de: float = MAX_NAME_DE) -> np.ndarray:
    """For (…, 3) uint8 RGB, the index into NAMES of each pixel's nearest named colour; -1 beyond max_de."""
    a = np.asarray(rgb, np.uint8)
    shift = 8 - NAME_BITS
    key = ((a[..., 0] >> shift).astype(np.int32) << (2 * NAME_BITS)) | \
          ((a[..., 1] >> shift).astype(np.int32) << NAME_BITS) | (a[..., 2] >> shift)
    idx, dist = _name_table()
    out = idx[key]
    return np.where(dist[key] > max_de, np.int8(-1), out)


def color_mask(image: np.ndarray, color: str) -> np.ndarray:
    """The pixels of an RGB image named `color` (nearest named colour, within MAX_NAME_DE)."""
    return color_names(image) == NAMES.index(color)


def named_share(pixels_rgb: np.ndarray, color: str) -> float:
    """The share of (…, 3) RGB pixels whose nearest named colour is `color`; 0 for no pixels."""
    if pixels_rgb.size == 0:
        return 0.0
    return float((color_names(pixels_rgb) == NAMES.index(color)).mean())


def delta_e_lab(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ΔE76 between (…, 3) CIELAB arrays (broadcast). Channel by channel: numpy's reductions over a last axis
    of length 3 are several times slower."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return np.sqrt((a[..., 0] - b[..., 0]) ** 2 + (a[..., 1] - b[..., 1]) ** 2 + (a[..., 2] - b[..., 2]) ** 2)


def distance_to(image_lab: np.ndarray, color_lab_value: np.ndarray) -> np.ndarray:
    """ΔE76 of every pixel to one CIELAB colour."""
    return delta_e_lab(image_lab, color_lab_value)


# ---- hue: a colour's direction in CIELAB, whatever its lightness ------------------------------------------
# Naming by the nearest colour fails on shaded objects: a red cup in shadow (RGB ~100,14,4) is nearer "brown"
# or "black" than "red". Its hue angle (atan2(b, a)) barely moves with shading, so hue_segment and
# check_locate also accept pixels of the target's hue. The numbers come from examples/assets/coffee.jpg (a red
# cup and saucer on wood): the crockery's hue is 34–45° (palette red: 34.7°) at chroma 35–72 in light and
# shadow, the wood's 45–70° (mostly 50–60°) — so the window is tight on the warm side. In the darkest shadows
# (L < 10) 8-bit RGB leaves a and b a few units: chroma drops under 20 and the hue drifts (the cup's shadow on
# the saucer: L 5, C 16–20, hue 20–25°), so there the chroma asked for falls with L; check_locate also widens
# the window there (dark_tol), but hue_segment does not: the saucer's cast shadow on the wood would join.

HUE_TOL = 10.0  # degrees either side of the target's hue
MIN_CHROMA = 20.0  # below this a pixel's hue is noise (JPEG, sensor) rather than colour
DARK_CHROMA_PER_L = 2.5  # …except that a very dark pixel cannot reach it: it needs C ≥ 2.5·L (so C 20 from L 8)
DARK_L = 10.0  # below this lightness hue_match's window is dark_tol
ACHROMATIC_CHROMA = 10.0  # a named colour with less chroma (black, white, gray) has no hue to match


def hue_chroma(image_lab: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hue angle in degrees [0, 360), chroma) of CIELAB pixels."""
    a, b = image_lab[..., 1], image_lab[..., 2]
    return np.degrees(np.arctan2(b, a)) % 360.0, np.hypot(a, b)


def target_hue(color: str) -> float | None:
    """The hue angle of a named colour; None for the achromatic ones (black, white, gray)."""
    c = color_lab(color)
    h, ch = hue_chroma(c)
    return None if float(ch) < ACHROMATIC_CHROMA else float(h)


def hue_match(image_lab: np.ndarray, color: str, tol: float = HUE_TOL, dark_tol: float | None = None) -> np.ndarray:
    """The pixels of `color`'s hue (within `tol` degrees; `dark_tol`, default `tol`, under DARK_L) with enough
    chroma to have a hue, at any lightness: a shaded object stays whole. All False for an achromatic colour."""
    th = target_hue(color)
    if th is None:
        return np.zeros(image_lab.shape[:-1], bool)
    h, ch = hue_chroma(image_lab)
    off = np.abs((h - th + 180.0) % 360.0 - 180.0)
    light = image_lab[..., 0]
    window = np.where(light < DARK_L, tol if dark_tol is None else dark_tol, tol)
    return (off <= window) & (ch >= np.minimum(MIN_CHROMA, DARK_CHROMA_PER_L * light))


# ---- the background model --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Background:
    """The colours of the image border. `threshold` (ΔE) separates background from the rest: twice how far
    the border's own pixels lie from their cluster (its noise), and never under MIN_BACKGROUND_DE."""

    centres: np.ndarray  # k×3 CIELAB
    spread: float  # mean std of the border band's CIELAB channels
    threshold: float


MIN_BACKGROUND_DE = 15.0
MINOR_CLUSTER = 0.08  # a border cluster with fewer of the band's pixels is an object touching the border


def border_band(a: np.ndarray, px: int = BORDER_PX) -> np.ndarray:
    """The pixels (N×C) of the outer `px`-wide band of an H×W×C array."""
    h, w = a.shape[:2]
    px = max(1, min(px, h // 2, w // 2))
    return np.concatenate([a[:px].reshape(-1, a.shape[2]), a[-px:].reshape(-1, a.shape[2]),
                           a[px:-px, :px].reshape(-1, a.shape[2]), a[px:-px, -px:].reshape(-1, a.shape[2])])


def kmeans(points: np.ndarray, k: int, iters: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic k-means (farthest-point start from the median): (centres, label per point)."""
    centres = [np.median(points, axis=0)]
    d = delta_e_lab(points, centres[0])
    for _ in range(1, k):
        if d.max() < 1e-3:
            break
        centres.append(points[int(d.argmax())])
        d = np.minimum(d, delta_e_lab(points, centres[-1]))
    c = np.array(centres, np.float32)
    for _ in range(iters):
        labels = delta_e_lab(points[:, None], c[None]).argmin(1)
        c = np.array([points[labels == j].mean(0) if (labels == j).any() else c[j] for j in range(len(c))], np.float32)
    return c, delta_e_lab(points[:, None], c[None]).argmin(1)


def background_model(image_lab: np.ndarray, k: int = 4) -> Background:
    band = border_band(image_lab)
    if len(band) > 3000:  # a regular sample is enough for four clusters, and keeps this a few ms
        band = band[:: len(band) // 3000 + 1]
    centres, labels = kmeans(band, k)
    share = np.bincount(labels, minlength=len(centres)) / len(labels)
    keep = share >= MINOR_CLUSTER
    if keep.any():
        centres = centres[keep]
    near = delta_e_lab(band[:, None], centres[None]).min(1)
    noise = float(np.percentile(near[near <= np.percentile(near, 90)], 95)) if len(near) else 0.0
    return Background(centres, float(band.std(0).mean()), max(MIN_BACKGROUND_DE, 2.0 * noise + 4.0))


def background_distance(image_lab: np.ndarray, bg: Background) -> np.ndarray:
    """ΔE of every pixel to the nearest background colour."""
    return np.min([distance_to(image_lab, c) for c in bg.centres], axis=0)


def foreground_mask(image_lab: np.ndarray, bg: Background | None = None) -> np.ndarray:
    """Pixels unlike every border colour, without specks (a 3×3 opening)."""
    bg = bg or background_model(image_lab)
    fg = (background_distance(image_lab, bg) > bg.threshold).astype(np.uint8)
    return cv2.morphologyEx(fg, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)).astype(bool)


# ---- blobs and shapes ------------------------------------------------------------------------------------

@dataclass
class Blob:
    """One connected component: its mask (image-sized), box (x0, y0, x1, y1; exclusive) and area in px."""

    mask: np.ndarray
    box: tuple[int, int, int, int]
    area: int


def min_blob_area(shape: tuple[int, ...]) -> int:
    return max(MIN_COMPONENT_PX, int(MIN_COMPONENT_FRAC * shape[0] * shape[1]))


def blobs(mask: np.ndarray, min_area: int | None = None, most: int = 40, holes: bool = False) -> list[Blob]:
    """The connected components (8-connected) of at least `min_area` px, largest first, at most `most`;
    with holes=False each blob's holes are filled."""
    min_area = min_blob_area(mask.shape) if min_area is None else min_area
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    order = [i for i in np.argsort(-stats[1:, cv2.CC_STAT_AREA]) + 1 if stats[i, cv2.CC_STAT_AREA] >= min_area]
    out = []
    for i in order[:most]:
        x, y, w, h, area = (int(v) for v in stats[i])
        m = np.zeros(mask.shape, bool)
        piece = labels[y:y + h, x:x + w] == i
        m[y:y + h, x:x + w] = piece if holes else fill_holes(piece)
        out.append(Blob(m, (x, y, x + w, y + h), area))
    return out


def fill_holes(mask: np.ndarray) -> np.ndarray:
    """The mask with every hole (background not connected to the outside) filled."""
    m = np.pad(mask.astype(np.uint8), 1)
    flood = m.copy()
    cv2.floodFill(flood, np.zeros((m.shape[0] + 2, m.shape[1] + 2), np.uint8), (0, 0), 1)
    return (m | (1 - flood)).astype(bool)[1:-1, 1:-1]


@dataclass(frozen=True)
class ShapeInfo:
    area: float  # of the largest contour, px
    solidity: float  # area / convex hull area: ~0.56 for a five-pointed star, ~1 for convex shapes
    extent: float  # area / minimum-area rectangle: 1/2 triangle, π/4 circle and ellipse, 1 square and rectangle
    aspect: float  # long / short side of that rectangle


def shape_info(mask: np.ndarray) -> ShapeInfo | None:
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    if not contours:
        return None
    c = max(contours, key=cv2.contourArea)
    area = float(cv2.contourArea(c))
    if area < 12:
        return None
    (_, _), (rw, rh), _ = cv2.minAreaRect(c)
    return ShapeInfo(area, area / max(float(cv2.contourArea(cv2.convexHull(c))), 1e-6), area / max(rw * rh, 1e-6),
                     max(rw, rh) / max(min(rw, rh), 1e-6))


def _bump(x: float, mid: float, width: float) -> float:
    return math.exp(-0.5 * ((x - mid) / width) ** 2)


def _step(x: float, edge: float, width: float) -> float:
    """~1 below `edge`, ~0 above it."""
    return 1.0 / (1.0 + math.exp((x - edge) / width))


def shape_scores(info: ShapeInfo | None) -> dict[str, float]:
    """How much a blob looks like each of SHAPES, each in [0, 1] (0 for every shape when there is no blob)."""
    if info is None:
        return {s: 0.0 for s in SHAPES}
    star = _step(info.solidity, 0.8, 0.04)  # solidity well under 0.8: a star
    convex = 1.0 - star
    squarish = _step(info.aspect, 1.25, 0.05)
    tri = convex * _bump(info.extent, 0.5, 0.08)
    rnd = convex * _bump(min(info.extent, 0.785), 0.785, 0.06) * _bump(max(info.extent, 0.785), 0.785, 0.06)
    box = convex * _bump(info.extent, 1.0, 0.07)
    return {"circle": rnd * squarish, "ellipse": rnd * (1 - squarish), "square": box * squarish,
            "rectangle": box * (1 - squarish), "triangle": tri, "star": star * _bump(info.extent, 0.4, 0.12)}


def shape_score(mask: np.ndarray, shape: str) -> float:
    return shape_scores(shape_info(mask)).get(shape, 0.0)


def classify_shape(mask: np.ndarray) -> str | None:
    scores = shape_scores(shape_info(mask))
    best = max(scores, key=scores.get)
    return best if scores[best] > 0.2 else None


# ---- drawing a shape in a box (draw_shape paints it, its check expects it) ------------------------------

def shape_box(shape: str, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """Where a replacement `shape` goes in the old object's box: circle, square, star and triangle in the
    centred square of the shorter side; ellipse and rectangle in the box itself, or in a centred box of aspect
    1.6 when the old box is squarish (a "rectangle" drawn in a square box would be a square)."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    if shape in ("ellipse", "rectangle"):
        if max(w, h) / max(min(w, h), 1) >= 1.35:
            return tuple(box)
        bw, bh = (w, w / 1.6) if w >= h else (h / 1.6, h)
    else:
        bw = bh = min(w, h)
    return (int(round(cx - bw / 2)), int(round(cy - bh / 2)), int(round(cx + bw / 2)), int(round(cy + bh / 2)))


def shape_outline(shape: str, box) -> tuple[str, list[tuple[float, float]]]:
    """("ellipse", [corner, corner]) or ("polygon", points) of `shape` inscribed in `box` (float pixels)."""
    x0, y0, x1, y1 = map(float, box)
    cx, cy, s = (x0 + x1) / 2, (y0 + y1) / 2, min(x1 - x0, y1 - y0) / 2
    if shape == "circle":
        return "ellipse", [(cx - s, cy - s), (cx + s, cy + s)]
    if shape == "ellipse":
        return "ellipse", [(x0, y0), (x1, y1)]
    if shape == "square":
        return "polygon", [(cx - s, cy - s), (cx + s, cy - s), (cx + s, cy + s), (cx - s, cy + s)]
    if shape == "rectangle":
        return "polygon", [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    if shape == "triangle":
        return "polygon", [(cx, y0), (x1, y1), (x0, y1)]
    if shape == "star":  # five points, inner radius 0.45 of the outer, nudged down to sit centred in the box
        return "polygon", [(cx + (s if k % 2 == 0 else 0.45 * s) * math.cos(-math.pi / 2 + k * math.pi / 5),
                            cy + 0.1 * s + (s if k % 2 == 0 else 0.45 * s) * math.sin(-math.pi / 2 + k * math.pi / 5))
                           for k in range(10)]
    raise ValueError(f"unknown shape {shape!r}; known shapes: {', '.join(SHAPES)}")


def shape_coverage(shape: str, box, size: tuple[int, int], ss: int = 4) -> np.ndarray:
    """H×W float32 coverage in [0, 1] of `shape` drawn in `box` on an image of size (H, W), anti-aliased by
    drawing at ss× and averaging (only the box's neighbourhood is drawn)."""
    from PIL import Image, ImageDraw

    h, w = size
    x0, y0 = max(0, int(math.floor(box[0])) - 2), max(0, int(math.floor(box[1])) - 2)
    x1, y1 = min(w, int(math.ceil(box[2])) + 2), min(h, int(math.ceil(box[3])) + 2)
    out = np.zeros((h, w), np.float32)
    if x1 <= x0 or y1 <= y0:
        return out
    im = Image.new("L", ((x1 - x0) * ss, (y1 - y0) * ss), 0)
    how, pts = shape_outline(shape, box)
    pts = [((px - x0) * ss, (py - y0) * ss) for px, py in pts]
    (ImageDraw.Draw(im).ellipse if how == "ellipse" else ImageDraw.Draw(im).polygon)(pts, fill=255)
    out[y0:y1, x0:x1] = np.asarray(im.resize((x1 - x0, y1 - y0), Image.Resampling.BOX), np.float32) / 255.0
    return out


def mask_box(mask: np.ndarray) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1), exclusive, of a non-empty mask."""
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


# ---- the quick target estimate (the locate tools refine it; features and checks use it as it is) -------

def candidate_blobs(image: np.ndarray, image_lab: np.ndarray, color: str | None,
                    bg: Background | None = None) -> list[Blob]:
    """Blobs of `color` (filled, specks opened away) or, without a colour, of the foreground."""
    if color:
        m = cv2.morphologyEx(color_mask(image, color).astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    else:
        m = foreground_mask(image_lab, bg)
    return blobs(m)


def pick_blob(candidates: list[Blob], shape: str | None, weight=None) -> tuple[Blob | None, float]:
    """The blob that best matches `shape` (and its score), or without a shape the largest (score 1).
    `weight(blob)` in [0, 1] scales each score (shape_segment weighs by the target's colour)."""
    if not candidates:
        return None, 0.0
    if not shape:
        return candidates[0], 1.0
    largest = candidates[0].area
    # the shape decides; size breaks near-ties: a small speck or a letter ("I" is a fine rectangle) can look
    # like anything, so a blob far smaller than the largest needs a clearly better shape to win
    scored = [(shape_score(b.mask, shape) * (0.5 + 0.5 * math.sqrt(b.area / largest))
               * (weight(b) if weight else 1.0), b)
              for b in candidates]
    score, blob = max(scored, key=lambda t: t[0])
    return blob, float(score)

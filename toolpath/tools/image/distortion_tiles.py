"""Where an image is distorted, tile by tile: each distortion's measure on a grid of square tiles, judged
against the image's own baseline (its typical or its best tiles), so a dark photo is not "under-exposed"
everywhere and a soft one not "blurry" everywhere; only the places that differ from the rest stand out.

Measures, each on the whole image at once and then pooled per tile (numpy and OpenCV, a few ms a picture):
- blur: the energy of the Laplacian over the energy of the gradient, at pixels with structure. A blur of
  width s spreads an edge's gradient over s pixels and its Laplacian over s², so the ratio falls as 1/s²
  whatever the edge's contrast; flat tiles (sky, a wall) have no edges to judge and are left out. Against the
  image's sharpest structured tiles;
- noise: the robust sigma of Immerkaer's high-pass (image_quality.noise_sigma's mask, its median absolute
  value per tile), against the image's median tile;
- JPEG blocking: the share of the tile's 8x8 block-boundary pixels whose step stands out from the steps
  beside it, across columns and across rows alike (the smaller share of the two: an edge that lies on the
  grid is one line in one direction), on the boundary phase the whole image shows most, against the image's
  median tile (a picture saved as JPEG before is blocky everywhere);
- over-exposure: the share of pixels clipped white; under-exposure: the tile's bright end (a high
  percentile of its luminance) against the image's median tile's, and its tonal range: darkening takes the
  highlights down too and squeezes the tones into a few dark levels, while a dark object or a shadow keeps
  lit neighbours, highlights or a wide range of tones in its tiles;
- colour cast: the mean chroma (CIELAB a*, b*) of the tile's least colourful pixels, against the image's
  median tile, judged on tiles with texture only: a cast tints even what should be grey, while a coloured
  object leaves its grey neighbours alone, and a flat patch of one colour cannot tell its colour from a tint.

The lines each measure is judged by (BLOCKY, DARK, CAST, ...) are set by reasoning about the measure; the
bars a whole region needs (grounded_quality.REGION_EVIDENCE) are fitted on a tuning split of the generated
set (benchmarks/giqa_tune.py), never on the seed the benchmark reports.

`tile_evidence` returns, per type, an evidence map (1 at the point where a tile counts as distorted) and a
severity map in [0, 1]; grounded_quality.py turns them into boxes.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

TYPES = ("blur", "noise", "jpeg", "overexposure", "underexposure", "color_cast")

BLOCK = 8  # JPEG's block side
STRUCTURE = 0.025  # luminance spread (std, in [0, 1]) below which a tile has no edges to judge blur on
BLUR_RATIO = 0.45  # a tile whose Laplacian/gradient ratio is below this share of the sharp tiles' is blurred
NOISE_FLOOR = 0.012  # sigma (luminance) a tile's noise must exceed its baseline by, whatever the baseline
NOISE_RATIO = 2.5  # ... and by this factor
BLOCKY = 0.3  # the share of a tile's block-boundary pixels whose step stands out, at which it is blocky
BLOCK_OUT = 2.0  # a boundary step stands out when it is this many times the mean step beside it ...
BLOCK_STEP = 1.5 / 255  # ... and at least this (a flat block's boundary step is a quantization level or more)
CLIPPED = 245  # a pixel this bright (luminance, of 255) counts as clipped white
OVER_SHARE = 0.35  # the share of clipped pixels above the baseline's that makes a tile over-exposed
DARK = 0.45  # a tile whose bright end is below this share of the median tile's bright end ...
DARK_MEAN = 0.3  # ... and below this in absolute terms is under-exposed
BRIGHT_END = 90  # the percentile of a tile's luminance taken as its bright end (100 minus it: its dark end)
SQUEEZED = 0.12  # ... and whose tones span less than this (luminance, dark end to bright end)
GRAIN = 0.008  # luminance spread (std) below which a tile is one flat colour, whose tint cannot be judged
CAST = 12.0  # ΔE (a*, b*) off the baseline's chroma at which a tile is tinted
NEUTRAL_SHARE = 0.3  # the share of a tile's pixels, least colourful first, whose chroma gives its cast


@dataclass(frozen=True)
class TileGrid:
    tile: int  # side in pixels
    rows: int
    cols: int
    height: int
    width: int

    def box(self, r0: int, c0: int, r1: int, c1: int) -> list[int]:
        """The pixel box [x0, y0, x1, y1] of tiles r0..r1-1, c0..c1-1, clipped to the image."""
        t = self.tile
        return [c0 * t, r0 * t, min(c1 * t, self.width), min(r1 * t, self.height)]


def tile_side(height: int, width: int) -> int:
    """A tile side on JPEG's grid: 16 px for pictures up to about 300 px, larger ones more, so a picture has
    some 18 tiles across its short side."""
    return BLOCK * max(2, round(min(height, width) / (BLOCK * 18)))


def _pooled(a: np.ndarray, grid: TileGrid, how: str = "mean") -> np.ndarray:
    """rows x cols of a per-pixel map pooled over each tile (the map padded at its edges to whole tiles)."""
    t = grid.tile
    pad = ((0, grid.rows * t - a.shape[0]), (0, grid.cols * t - a.shape[1]))
    a = np.pad(a, pad, mode="edge")
    blocks = a.reshape(grid.rows, t, grid.cols, t).swapaxes(1, 2).reshape(grid.rows, grid.cols, t * t)
    if how == "median":
        return np.median(blocks, axis=2)
    return blocks.mean(axis=2) if how == "mean" else blocks


def _luma(rgb: np.ndarray) -> np.ndarray:
    return rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32) / 255.0


def blur_evidence(g: np.ndarray, grid: TileGrid) -> tuple[np.ndarray, np.ndarray]:
    smooth = cv2.medianBlur((g * 255).astype(np.uint8), 3).astype(np.float32) / 255.0  # noise is not detail
    gx, gy = cv2.Sobel(smooth, cv2.CV_32F, 1, 0) / 8, cv2.Sobel(smooth, cv2.CV_32F, 0, 1) / 8
    grad = _pooled(gx * gx + gy * gy, grid)
    lap = _pooled(cv2.Laplacian(smooth, cv2.CV_32F) ** 2, grid)
    ratio = lap / np.maximum(grad, 1e-9)
    # structure from the tile's spread, which a blur keeps, not from its gradient, which a blur takes away
    structured = np.sqrt(np.maximum(_pooled(g * g, grid) - _pooled(g, grid) ** 2, 0.0)) > STRUCTURE
    if structured.sum() < 2:
        return np.zeros_like(ratio), np.zeros_like(ratio)
    sharp = float(np.percentile(ratio[structured], 80))  # the image's own sharpest tiles
    rel = ratio / max(sharp, 1e-9)
    evidence = np.where(structured, BLUR_RATIO / np.maximum(rel, 1e-6), 0.0)
    return evidence, np.clip(1.0 - rel, 0.0, 1.0) * structured


def noise_evidence(g: np.ndarray, grid: TileGrid) -> tuple[np.ndarray, np.ndarray]:
    k = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], np.float32)  # Immerkaer: cancels planes and ramps
    r = np.abs(cv2.filter2D(g, cv2.CV_32F, k, borderType=cv2.BORDER_REFLECT))
    sigma = 1.4826 * _pooled(r, grid, "median") / 6.0  # as image_quality.noise_sigma, per tile
    base = float(np.median(sigma))
    need = max(base * NOISE_RATIO, base + NOISE_FLOOR)
    return sigma / need, np.clip((sigma - base) / 0.1, 0.0, 1.0)


def _grid_steps(g: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel, whether the step across a block boundary along `axis` stands out from the steps beside
    it (on the grid phase the whole image shows most: a crop need not start on the grid), and where the
    boundaries are. Blocking is a step at the boundary where the block's inside is smooth; an edge in the
    content makes steps on and off the grid alike."""
    d = np.abs(np.diff(g, axis=axis))
    beside = (np.roll(d, 1, axis=axis) + np.roll(d, -1, axis=axis)) / 2
    stands_out = (d > BLOCK_OUT * beside) & (d >= BLOCK_STEP)
    line = stands_out.mean(axis=1 - axis)
    phase = int(np.argmax([line[p::BLOCK].mean() for p in range(BLOCK)]))
    on = (np.arange(d.shape[axis]) % BLOCK) == phase
    shape = [1, 1]
    shape[axis] = -1
    on = on.reshape(shape)
    pad = [(0, 0), (0, 0)]
    pad[axis] = (0, 1)
    return np.pad(stands_out & on, pad), np.pad(np.broadcast_to(on, d.shape), pad)


def jpeg_evidence(g: np.ndarray, grid: TileGrid) -> tuple[np.ndarray, np.ndarray]:
    # The share of a tile's block-boundary pixels whose step stands out, across columns and across rows:
    # compression blocks both ways, while an edge in the picture (or where a brighter patch begins) that
    # happens to lie on the grid is one straight line in one direction; the smaller share of the two counts.
    shares = []
    for axis in (1, 0):
        out, on = _grid_steps(g, axis)
        shares.append(_pooled(out.astype(np.float32), grid) / np.maximum(_pooled(on.astype(np.float32), grid), 1e-6))
    share = np.minimum(*shares)
    # a picture that was a JPEG or a video frame before is blocky everywhere: only more than that counts
    need = max(BLOCKY, 2.0 * float(np.median(share)))
    return share / need, np.clip(share / (2 * BLOCKY), 0.0, 1.0)


def exposure_evidence(rgb: np.ndarray, g: np.ndarray, grid: TileGrid) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    clipped = _pooled((g >= CLIPPED / 255).astype(np.float32), grid)  # luminance: a cast clips one channel only
    over = clipped - float(np.median(clipped))
    # Under-exposure scales a place's highlights down with the rest, while a dark object beside lit ones (or
    # with its own highlights) keeps a bright end: judge the tile's bright end against the image's typical one.
    # It also squeezes the place's tones into a few dark levels (its texture is lost), while a shadow or a
    # dark object in a well exposed picture keeps a wide range of them: the tile's tonal range counts too.
    lo, bright = np.percentile(_pooled(g, grid, "all"), [100 - BRIGHT_END, BRIGHT_END], axis=2)
    base = max(float(np.median(bright)), 1e-3)
    rel = bright / base
    under = np.minimum(np.minimum(DARK / np.maximum(rel, 1e-6), DARK_MEAN / np.maximum(bright, 1e-6)),
                       SQUEEZED / np.maximum(bright - lo, 1e-6))
    return {"overexposure": (over / OVER_SHARE, np.clip(over, 0.0, 1.0)),
            "underexposure": (under, np.clip(1.0 - rel, 0.0, 1.0))}


def cast_evidence(rgb: np.ndarray, grid: TileGrid) -> tuple[np.ndarray, np.ndarray]:
    lab = cv2.cvtColor(rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)
    a, b = _pooled(lab[..., 1], grid, "all"), _pooled(lab[..., 2], grid, "all")
    chroma = np.hypot(a - np.median(a), b - np.median(b))
    keep = max(1, int(NEUTRAL_SHARE * chroma.shape[2]))
    order = np.argsort(chroma, axis=2)[..., :keep]
    ta = np.take_along_axis(a, order, axis=2).mean(axis=2)
    tb = np.take_along_axis(b, order, axis=2).mean(axis=2)
    off = np.hypot(ta - np.median(ta), tb - np.median(tb))
    # near black, chroma means nothing; a flat patch of one colour (a painted object) cannot tell its own
    # colour from a tint, while a tinted place with texture shows the tint on every shade of it
    g = lab[..., 0] / 100.0
    textured = np.sqrt(np.maximum(_pooled(g * g, grid) - _pooled(g, grid) ** 2, 0.0)) > GRAIN
    lit = (_pooled(lab[..., 0], grid) > 15) & textured
    return np.where(lit, off / CAST, 0.0), np.clip(off / 30.0, 0.0, 1.0) * lit


def tile_evidence(rgb: np.ndarray) -> tuple[TileGrid, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The tile grid of an H×W×3 uint8 image and, per distortion type, (evidence, severity) maps over it."""
    h, w = rgb.shape[:2]
    t = tile_side(h, w)
    grid = TileGrid(t, -(-h // t), -(-w // t), h, w)
    g = _luma(rgb)
    out = {"blur": blur_evidence(g, grid), "noise": noise_evidence(g, grid), "jpeg": jpeg_evidence(g, grid),
           **exposure_evidence(rgb, g, grid), "color_cast": cast_evidence(rgb, grid)}
    return grid, out

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
- JPEG blocking: the mean step across the 8x8 block boundaries over the mean step inside blocks, on the
  boundary phase the whole image shows most (a crop need not start on the grid);
- over-exposure: the share of pixels clipped white; under-exposure: the tile's mean luminance against the
  image's median tile and its share of crushed blacks;
- colour cast: the mean chroma (CIELAB a*, b*) of the tile's least colourful pixels, against the image's
  median tile: a cast tints even what should be grey, while a coloured object leaves its grey neighbours alone.

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
BLOCKY = 1.8  # boundary step over inner step at which a tile is blocky (and 1.5x the image's median tile)
BLOCK_STEP = 0.004  # ... when the boundary step is at least this (flat tiles have neither)
CLIPPED = 245  # a pixel this bright (luminance, of 255) counts as clipped white
OVER_SHARE = 0.35  # the share of clipped pixels above the baseline's that makes a tile over-exposed
DARK = 0.45  # a tile darker than this share of the median tile ...
DARK_MEAN = 0.25  # ... and darker than this in absolute terms is under-exposed
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


def jpeg_evidence(g: np.ndarray, grid: TileGrid) -> tuple[np.ndarray, np.ndarray]:
    dx = np.abs(np.diff(g, axis=1))
    dy = np.abs(np.diff(g, axis=0))
    # the phase of the block grid: the column offset whose steps stand out most over the whole image
    col = dx.mean(axis=0)
    phase = int(np.argmax([col[p::BLOCK].mean() / max(col.mean(), 1e-9) for p in range(BLOCK)]))
    on_x = (np.arange(dx.shape[1]) % BLOCK) == phase
    on_y = (np.arange(dy.shape[0]) % BLOCK) == phase
    bx = np.zeros_like(g)
    bx[:, :-1] = dx * on_x
    bx[:-1, :] += dy * on_y[:, None]
    ix = np.zeros_like(g)
    ix[:, :-1] = dx * ~on_x
    ix[:-1, :] += dy * ~on_y[:, None]
    share = 1.0 / BLOCK  # of each direction's steps on a boundary
    edge = _pooled(bx, grid) / share / 2
    inner = _pooled(ix, grid) / (1 - share) / 2
    ratio = edge / np.maximum(inner, 1e-4)
    # a picture that was a JPEG or a video frame before is blocky everywhere: only more than that counts
    need = max(BLOCKY, 1.5 * float(np.median(ratio[edge > BLOCK_STEP]))) if (edge > BLOCK_STEP).any() else BLOCKY
    evidence = np.where(edge > BLOCK_STEP, ratio / need, 0.0)
    return evidence, np.clip((ratio - 1.0) / 3.0, 0.0, 1.0) * (edge > BLOCK_STEP)


def exposure_evidence(rgb: np.ndarray, g: np.ndarray, grid: TileGrid) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    clipped = _pooled((g >= CLIPPED / 255).astype(np.float32), grid)  # luminance: a cast clips one channel only
    over = clipped - float(np.median(clipped))
    mean = _pooled(g, grid)
    base = max(float(np.median(mean)), 1e-3)
    rel = mean / base
    under = np.minimum(DARK / np.maximum(rel, 1e-6), DARK_MEAN / np.maximum(mean, 1e-6))
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
    lit = _pooled(lab[..., 0], grid) > 15  # near black, chroma means nothing
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

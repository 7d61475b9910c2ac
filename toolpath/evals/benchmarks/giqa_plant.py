"""Planting a distortion of known type, severity and box into a clean image: what the generated GIQA set is
made of, so its truth is known by construction. Each function changes only the pixels inside the box.

Severity 0..1 sets the strength: blur sigma 1.5-5 px, noise sigma 0.04-0.14 (luminance), JPEG quality 35
down to 5, exposure gain 1.5-3 (over) or 0.35-0.1 (under), a cast's channel gains 15-40% apart.
"""

from __future__ import annotations

import io

import numpy as np

from ...tools.image.distortion_tiles import BLOCK, TYPES

CASTS = {"warm": (1.0, 0.0, -1.0), "cool": (-1.0, 0.0, 1.0), "green": (-0.6, 0.8, -0.6), "magenta": (0.8, -0.8, 0.8)}


def _blur(a: np.ndarray, s: float, rng: np.random.Generator) -> np.ndarray:
    import cv2

    sigma = 1.5 + 3.5 * s
    return cv2.GaussianBlur(a, (0, 0), sigma, borderType=cv2.BORDER_REFLECT)


def _noise(a: np.ndarray, s: float, rng: np.random.Generator) -> np.ndarray:
    return a + rng.normal(0.0, (0.04 + 0.10 * s) * 255.0, a.shape)


def _jpeg(a: np.ndarray, s: float, rng: np.random.Generator) -> np.ndarray:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8)).save(buf, format="JPEG",
                                                                       quality=round(35 - 30 * s))
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB")).astype(np.float64)


def _over(a: np.ndarray, s: float, rng: np.random.Generator) -> np.ndarray:
    return a * (1.5 + 1.5 * s) + 20.0


def _under(a: np.ndarray, s: float, rng: np.random.Generator) -> np.ndarray:
    return a * (0.35 - 0.25 * s)


def _cast(a: np.ndarray, s: float, rng: np.random.Generator) -> np.ndarray:
    direction = np.array(CASTS[list(CASTS)[int(rng.integers(len(CASTS)))]])
    return a * (1.0 + (0.15 + 0.25 * s) * direction)


PLANT = {"blur": _blur, "noise": _noise, "jpeg": _jpeg, "overexposure": _over, "underexposure": _under,
         "color_cast": _cast}
assert tuple(PLANT) == TYPES


def plant(rgb: np.ndarray, kind: str, severity: float, box: list[int], seed: int = 0) -> np.ndarray:
    """A copy of an H×W×3 uint8 image with `kind` planted inside `box` [x0, y0, x1, y1] at `severity`. The
    JPEG box is compressed on its own, so its blocks start at its corner (put it on the 8 px grid to keep
    them on the image's)."""
    if kind not in PLANT:
        raise ValueError(f"unknown distortion {kind!r}; one of {', '.join(TYPES)}")
    x0, y0, x1, y1 = box
    out = rgb.copy()
    a = rgb.astype(np.float64)
    # Blur reads pixels around the box (a blur of the whole picture, then cut), the others only the box's.
    src = a if kind == "blur" else a[y0:y1, x0:x1]
    done = PLANT[kind](src, float(severity), np.random.default_rng(seed))
    part = done[y0:y1, x0:x1] if kind == "blur" else done
    out[y0:y1, x0:x1] = np.clip(np.rint(part), 0, 255).astype(np.uint8)
    return out


def structure(rgb: np.ndarray, box: list[int]) -> float:
    """Mean squared luminance gradient inside a box: how much a blur there can show."""
    import cv2

    x0, y0, x1, y1 = box
    g = rgb[y0:y1, x0:x1].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32) / 255.0
    gx, gy = cv2.Sobel(g, cv2.CV_32F, 1, 0) / 8, cv2.Sobel(g, cv2.CV_32F, 0, 1) / 8
    return float((gx * gx + gy * gy).mean())


def random_boxes(rng: np.random.Generator, width: int, height: int, n: int, tries: int = 200) -> list[list[int]]:
    """Up to `n` boxes on the 8 px grid, each 25-45% of the image's width and height, apart by a block."""
    boxes: list[list[int]] = []
    for _ in range(tries):
        if len(boxes) == n:
            break
        bw = BLOCK * int(rng.integers(round(0.25 * width / BLOCK), round(0.45 * width / BLOCK) + 1))
        bh = BLOCK * int(rng.integers(round(0.25 * height / BLOCK), round(0.45 * height / BLOCK) + 1))
        x0 = BLOCK * int(rng.integers(0, (width - bw) // BLOCK + 1))
        y0 = BLOCK * int(rng.integers(0, (height - bh) // BLOCK + 1))
        box = [x0, y0, x0 + bw, y0 + bh]
        if all(box[2] + BLOCK <= b[0] or b[2] + BLOCK <= box[0] or box[3] + BLOCK <= b[1] or b[3] + BLOCK <= box[1]
               for b in boxes):
            boxes.append(box)
    return boxes

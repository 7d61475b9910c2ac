"""Where a model's coordinates point on the screen: one conversion, both ways, for every convention.

GUI models answer in the space of the image they were shown, not in screen pixels:

    absolute     pixels of the model's resized screenshot (Qwen2-VL's smart_resize: each side a multiple of
                 28, the area within [min_pixels, max_pixels]); ScaleCUA's and Qwen2.5-VL's convention
    normalized   fractions of the width and height, in [0, 1]
    grid1000     a 0–1000 grid over the image (Qwen-VL, CogAgent, FSD's points and traces)

`CoordinateSpace(convention, screen_w, screen_h).to_screen(x, y)` is what executes; `from_screen` is what an
offline policy (or a test) uses to speak the model's convention. A point outside the image is an error that
names the coordinate and its range, never clamped silently: a model that clicks off-screen must be told.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

Convention = Literal["absolute", "normalized", "grid1000"]
CONVENTIONS: tuple[str, ...] = ("absolute", "normalized", "grid1000")

# Qwen2-VL / Qwen2.5-VL image processor defaults (factor = patch 14 × merge 2).
FACTOR = 28
MIN_PIXELS = 56 * 56
MAX_PIXELS = 14 * 14 * 4 * 16384


def smart_resize(height: int, width: int, factor: int = FACTOR, min_pixels: int = MIN_PIXELS,
                 max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """(height, width) the model sees: each a multiple of `factor`, area in [min_pixels, max_pixels], aspect kept."""
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"aspect ratio of {width}x{height} is over 200")
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


@dataclass(frozen=True)
class CoordinateSpace:
    convention: str
    screen_w: int
    screen_h: int
    min_pixels: int = MIN_PIXELS
    max_pixels: int = MAX_PIXELS
    model_w: float = field(init=False)
    model_h: float = field(init=False)

    def __post_init__(self) -> None:
        if self.convention not in CONVENTIONS:
            raise ValueError(f"unknown coordinate convention {self.convention!r}; expected one of "
                             f"{', '.join(CONVENTIONS)}")
        if self.convention == "absolute":
            h, w = smart_resize(self.screen_h, self.screen_w, min_pixels=self.min_pixels, max_pixels=self.max_pixels)
        elif self.convention == "normalized":
            h, w = 1.0, 1.0
        else:
            h, w = 1000.0, 1000.0
        object.__setattr__(self, "model_w", w)
        object.__setattr__(self, "model_h", h)

    def describe(self) -> str:
        """How the model should write coordinates, for its prompt."""
        if self.convention == "absolute":
            return (f"Coordinates are pixels of the screenshot as you see it ({int(self.model_w)}x{int(self.model_h)}):"
                    f" x from 0 (left) to {int(self.model_w)}, y from 0 (top) to {int(self.model_h)}.")
        if self.convention == "normalized":
            return ("Coordinates are fractions of the screenshot: x from 0.0 (left) to 1.0 (right), "
                    "y from 0.0 (top) to 1.0 (bottom).")
        return ("Coordinates are on a 0-1000 grid over the screenshot: x from 0 (left) to 1000 (right), "
                "y from 0 (top) to 1000 (bottom).")

    def to_screen(self, x: float, y: float) -> tuple[int, int]:
        """Screen pixel (integer, inside the screen) for a model point; ValueError if it lies outside the image."""
        for name, v, hi in (("x", x, self.model_w), ("y", y, self.model_h)):
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f"{name}={v!r} is not a number")
            if v < 0 or v > hi:
                raise ValueError(f"{name}={v:g} is outside the screenshot: {self.convention} coordinates run from 0 "
                                 f"to {hi:g}")
        px = x * self.screen_w / self.model_w
        py = y * self.screen_h / self.model_h
        # The pixel whose area holds the point; the far edge (x == width) is the last pixel.
        return min(int(px), self.screen_w - 1), min(int(py), self.screen_h - 1)

    def from_screen(self, px: float, py: float) -> tuple[float, float]:
        """The model point for the centre of screen pixel (px, py), in this convention
        (rounded as a model writes it)."""
        x = (px + 0.5) * self.model_w / self.screen_w
        y = (py + 0.5) * self.model_h / self.screen_h
        if self.convention == "normalized":
            return round(x, 4), round(y, 4)
        return float(round(x)), float(round(y))

"""The measured quality of an image: sharpness, exposure and noise, each in [0, 1], and their geometric mean as
one score. No model: fixed filters on the luminance, so the same pixels always give the same score.

- noise: the standard deviation of the high-frequency residual (Immerkaer's 3x3 mask, which cancels planes and
  so flat areas and ramps), taken as a robust median so the few edge pixels of an image do not count as noise;
- sharpness: the variance of the Laplacian of the luminance after a 3x3 median filter (the filter takes most of
  the noise out first, so noise does not read as detail); blur and lost contrast both lower it;
- exposure: how far the mean luminance is from a well-exposed band, and the fraction of pixels clipped to
  black or white.

The scales below were chosen on easy-vqa's and the generated scenes' 64 px images (clean images score
about 0.9, a Gaussian blur of 1.5 px, noise of sigma 0.08 or a 0.35x darkening well under 0.6), so the score
ranks degraded copies of such pictures; it is not calibrated against human ratings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where an image is measured, not when the tool registers
    import numpy as np

SHARPNESS_SCALE = 0.002  # Laplacian variance at which sharpness is 0.5 (luminance in [0, 1])
NOISE_SCALE = 0.04  # residual sigma at which the noise score is 0.5
WELL_EXPOSED = (0.35, 0.96)  # mean luminance band that costs nothing
CLIP_LOW, CLIP_HIGH = 0.5 / 255, 254.5 / 255  # only pixels at 0 or 255 count as clipped
EXPOSURE_FLOOR = 0.05  # a blown-out image still shows something; the floor keeps the other two measures in play


@dataclass(frozen=True)
class ImageQuality:
    sharpness: float
    exposure: float
    noise: float  # 1 = no measurable noise
    score: float  # the geometric mean of the three

    def as_dict(self) -> dict:
        return {k: round(v, 4) for k, v in asdict(self).items()}


def luminance(image) -> np.ndarray:
    """H×W float luminance in [0, 1] of an H×W×3 (or H×W) uint8 array or a PIL image."""
    import numpy as np

    a = np.asarray(image)
    if a.ndim == 3:
        a = a[..., :3].astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    a = a.astype(np.float64)
    return a / 255.0 if a.max(initial=0) > 1.0 or np.asarray(image).dtype == np.uint8 else a


def noise_sigma(gray) -> float:
    import numpy as np

    g = gray
    if min(g.shape) < 3:
        return 0.0
    r = (g[:-2, :-2] - 2 * g[:-2, 1:-1] + g[:-2, 2:] - 2 * g[1:-1, :-2] + 4 * g[1:-1, 1:-1] - 2 * g[1:-1, 2:]
         + g[2:, :-2] - 2 * g[2:, 1:-1] + g[2:, 2:])
    # For white noise of sigma s the residual has sigma 6 s (the mask's squared weights sum to 36).
    return float(1.4826 * np.median(np.abs(r)) / 6.0)


def laplacian_variance(gray) -> float:
    import numpy as np
    from scipy.ndimage import median_filter

    g = median_filter(gray, size=3, mode="reflect")
    if min(g.shape) < 3:
        return 0.0
    lap = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4 * g[1:-1, 1:-1]
    return float(np.var(lap))


def exposure_score(gray) -> float:
    import numpy as np

    mean = float(gray.mean())
    low, high = WELL_EXPOSED
    off = max(0.0, low - mean) / low + max(0.0, mean - high) / (1.0 - high)
    clipped = float(((gray <= CLIP_LOW) | (gray >= CLIP_HIGH)).mean())
    return float(np.clip(1.0 - off - clipped, EXPOSURE_FLOOR, 1.0))


def measure(image) -> ImageQuality:
    """The quality of an image (an H×W×3 uint8 array, or anything numpy reads as one, e.g. a PIL image)."""
    gray = luminance(image)
    if gray.ndim != 2 or gray.size == 0:
        raise ValueError(f"image quality needs an H×W or H×W×3 image, got shape {getattr(gray, 'shape', None)}")
    lv = laplacian_variance(gray)
    sharp = lv / (lv + SHARPNESS_SCALE)
    sigma = noise_sigma(gray)
    noise = 1.0 / (1.0 + (sigma / NOISE_SCALE) ** 2)
    expo = exposure_score(gray)
    score = (max(sharp, 1e-6) * max(expo, 1e-6) * max(noise, 1e-6)) ** (1 / 3)
    return ImageQuality(float(sharp), float(expo), float(noise), float(score))


def score(image) -> float:
    return measure(image).score


# ---- degraded copies: what the query-completion corpus and the tests vary quality with ------------------------

DEGRADATIONS = ("none", "blur", "noise", "dark", "bright")


def degrade(image, kind: str, strength: float, seed: int = 0):
    """A degraded copy of an H×W×3 uint8 image: `blur` (Gaussian, sigma = strength px), `noise` (Gaussian, sigma =
    strength in luminance units), `dark` (multiplied by 1 - strength), `bright` (over-exposed: multiplied by
    1 + 2 strength and clipped); `none` returns a copy. Deterministic by seed."""
    import numpy as np

    a = np.asarray(image).astype(np.float64)
    if kind == "none":
        out = a
    elif kind == "blur":
        from scipy.ndimage import gaussian_filter

        out = gaussian_filter(a, sigma=(strength, strength, 0), mode="reflect")
    elif kind == "noise":
        out = a + np.random.default_rng(seed).normal(0.0, strength * 255.0, a.shape)
    elif kind == "dark":
        out = a * (1.0 - strength)
    elif kind == "bright":
        out = a * (1.0 + 2.0 * strength)
    else:
        raise ValueError(f"unknown degradation {kind!r}; one of {', '.join(DEGRADATIONS)}")
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)

"""Restoring an image with an INR fitted to it; the network's smoothness is the only prior.

denoise: fit on the noisy pixels, holding a tenth out; stop once the held-out error stops falling (a network
that starts fitting noise fits what the held-out pixels do not share). super_resolve: fit on the low-resolution
pixel grid, render on a grid `scale` times finer over the same square. inpaint: fit on the known pixels,
render everywhere, and keep the known pixels as they were.
"""

from __future__ import annotations

import numpy as np

from .fit import Fit, as_float_image, fit

DENOISE_HOLDOUT = 0.1
DENOISE_PATIENCE = 25


def denoise(image, activation: str = "cosmo", steps: int = 300, seed: int = 0, **options) -> tuple[np.ndarray, Fit]:
    a = as_float_image(image)
    f = fit(a, activation, steps, seed, holdout=DENOISE_HOLDOUT, patience=DENOISE_PATIENCE, **options)
    return f.render(*a.shape[:2]), f


def super_resolve(image, scale: int, activation: str = "cosmo", steps: int = 300, seed: int = 0,
                  **options) -> tuple[np.ndarray, Fit]:
    a = as_float_image(image)
    f = fit(a, activation, steps, seed, **options)
    return f.render(a.shape[0] * scale, a.shape[1] * scale), f


def inpaint(image, known: np.ndarray, activation: str = "cosmo", steps: int = 300, seed: int = 0,
            **options) -> tuple[np.ndarray, Fit]:
    a = as_float_image(image)
    f = fit(a, activation, steps, seed, known=known, **options)
    out = f.render(*a.shape[:2])
    keep = np.asarray(known, bool)
    out[keep] = a[keep]
    return out, f

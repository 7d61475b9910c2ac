"""Restoring an image with an INR fitted to it; the network's smoothness is the only prior.

denoise: fit on the noisy pixels, holding a tenth out; stop once the held-out error stops falling (a network
that starts fitting noise fits what the held-out pixels do not share). super_resolve: fit a network whose box
average over each low-resolution pixel matches that pixel (the low-resolution image taken as the area
downsampling of the unknown one), render it on the grid `scale` times finer. Fitting the small image's own
pixel centres instead and rendering finer would only interpolate them, which bicubic interpolation already
does well; the averaging ties the fine values to what was observed, and a small total-variation penalty chooses
among the fine images that average right one without invented detail (the network alone fills what the
averages leave free with its own high frequencies). inpaint: fit on the known pixels,
render everywhere, and keep the known pixels as they were.
"""

from __future__ import annotations

import numpy as np

from .fit import Fit, as_float_image, fit

DENOISE_HOLDOUT = 0.1
DENOISE_PATIENCE = 25
# Weight of the total-variation penalty in super-resolution, chosen on a photo outside the benchmark's five
# (docs/results/inr.md); the same for every activation.
SR_SMOOTHNESS = 0.01


def denoise(image, activation: str = "cosmo", steps: int = 300, seed: int = 0, **options) -> tuple[np.ndarray, Fit]:
    a = as_float_image(image)
    f = fit(a, activation, steps, seed, holdout=DENOISE_HOLDOUT, patience=DENOISE_PATIENCE, **options)
    return f.render(*a.shape[:2]), f


def super_resolve(image, scale: int, activation: str = "cosmo", steps: int = 300, seed: int = 0,
                  **options) -> tuple[np.ndarray, Fit]:
    a = as_float_image(image)
    options.setdefault("smoothness", SR_SMOOTHNESS)
    f = fit(a, activation, steps, seed, supersample=scale, **options)
    return f.render(a.shape[0] * scale, a.shape[1] * scale), f


def inpaint(image, known: np.ndarray, activation: str = "cosmo", steps: int = 300, seed: int = 0,
            **options) -> tuple[np.ndarray, Fit]:
    a = as_float_image(image)
    f = fit(a, activation, steps, seed, known=known, **options)
    out = f.render(*a.shape[:2])
    keep = np.asarray(known, bool)
    out[keep] = a[keep]
    return out, f

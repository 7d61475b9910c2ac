"""BRISQUE (Mittal et al. 2012), the `brisque` package's trained SVR model, as a quality in [0, 1].

The package's own `score` breaks on numpy 2 (its feature fit returns one-element arrays that numpy no longer
turns into floats), so its feature extraction and model are called here and the features flattened between
them; the features, scaling and model are the package's. Its result is a distortion in about 0 (pristine) to
100; the quality is 1 - distortion / 100, clipped.
"""

from __future__ import annotations

import functools
import warnings

MIN_SIDE = 32  # BRISQUE's local statistics need a few 7x7 windows at half size


@functools.lru_cache(maxsize=1)
def _model():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its module imports the deprecated scipy.ndimage.filters
        from brisque import BRISQUE

        return BRISQUE(url=False)


def missing() -> str | None:
    """None when BRISQUE runs here, else why not."""
    try:
        _model()
    except Exception as err:  # noqa: BLE001 — an import or model-file failure: the caller falls back and says why
        return f"the brisque package cannot run ({type(err).__name__}: {err}); pip install 'toolpath[edit]'"
    return None


def distortion(rgb) -> float:
    """BRISQUE's score of an H×W×3 uint8 image: about 0 for pristine, higher for more distorted."""
    import cv2
    import numpy as np
    import skimage.color

    model = _model()
    gray = skimage.color.rgb2gray(np.asarray(rgb))
    half = cv2.resize(gray, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_CUBIC)
    with np.errstate(all="ignore"):
        feats = np.concatenate([model.calculate_brisque_features(g, kernel_size=7, sigma=7 / 6) for g in (gray, half)])
    flat = np.array([np.asarray(f, dtype=np.float64).ravel()[0] for f in feats])
    return float(model.calculate_image_quality_score(flat))


def quality(rgb) -> float | None:
    """1 - BRISQUE / 100 in [0, 1], or None where the package cannot run or the image is too small for it."""
    import math

    if min(rgb.shape[:2]) < MIN_SIDE or missing() is not None:
        return None
    value = distortion(rgb)
    if not math.isfinite(value):
        return None
    return min(1.0, max(0.0, 1.0 - value / 100.0))

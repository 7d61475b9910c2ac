"""PSNR and SSIM between two (H, W, C) float images in [0, 1], from scikit-image (the `inr` extra)."""

from __future__ import annotations

import numpy as np


def _metrics():
    try:
        from skimage import metrics
    except ImportError as e:
        raise RuntimeError("PSNR/SSIM need scikit-image: pip install 'toolpath[inr]'") from e
    return metrics


def psnr(estimate: np.ndarray, reference: np.ndarray) -> float:
    if np.array_equal(estimate, reference):
        return float("inf")
    return float(_metrics().peak_signal_noise_ratio(reference, estimate, data_range=1.0))


def ssim(estimate: np.ndarray, reference: np.ndarray) -> float:
    # SSIM's default 7x7 window needs a side of 7; a smaller image gets the largest odd window that fits.
    side = min(reference.shape[:2])
    window = min(7, side if side % 2 else side - 1)
    if window < 3:
        return float("nan")
    return float(_metrics().structural_similarity(reference, estimate, data_range=1.0, channel_axis=-1,
                                                  win_size=window))

"""The precondition features learned subroutines test (planners/subroutines.py): a few numbers about an image
and a subtask, such as `target_area < 0.05`, measured before any tool runs.

`image_features(image, subtask)` works on a copy at most FEATURE_SIDE px wide (it runs for every subtask, so
it must stay cheap) and returns the numbers of FEATURES. It builds on the measurements of features.py and,
for text subtasks, on the text-line finder of text.py.
"""

from __future__ import annotations

import cv2
import numpy as np

from .edit_base import COLORS, SHAPES, EditState, Subtask
from .features import background_model, candidate_blobs, foreground_mask, lab, pick_blob, require_image
from .text import text_lines

FEATURES = {
    "image_pixels": "height × width of the input image, px",
    "target_area": "share of the image the quick colour/shape estimate of the target covers; 0 when not found",
    "target_components": "blobs of the target's colour (of the foreground when it names no colour)",
    "background_uniformity": "1 − spread of the border's colours (mean CIELAB channel std / 30), clipped to 0..1",
    "background_texture": "mean luminance gradient (Sobel, 0..1 scale) outside the target estimate",
    "crowding": "share of the target's box grown ×2 that is other foreground (neither background nor target)",
    "touches_border": "1 when the target estimate touches the image border, else 0",
    "text_height": "median height (px) of text-like lines (text kinds only; 0 when none or another kind)",
    "foreground_share": "share of the image that is not background-coloured (the border colour model)",
}

FEATURE_SIDE = 160  # image_features works on a copy at most this wide or high


def image_features(image: np.ndarray, subtask: Subtask) -> dict[str, float]:
    """The FEATURES of `image` for `subtask` (see FEATURES for each one's meaning)."""
    require_image(EditState(image=image), "image_features")
    h, w = image.shape[:2]
    scale = min(1.0, FEATURE_SIDE / max(h, w))
    small = cv2.resize(image, (max(2, round(w * scale)), max(2, round(h * scale))), interpolation=cv2.INTER_AREA) \
        if scale < 1 else image
    L = lab(small)
    bg = background_model(L)
    fg = foreground_mask(L, bg)
    target = subtask.target
    color = target.color if target and target.color in COLORS else None
    shape = target.shape if target and target.shape in SHAPES else None
    cands = candidate_blobs(small, L, color, bg) if (color or shape) else []
    blob, _ = pick_blob(cands, shape)
    est = blob.mask if blob else np.zeros(fg.shape, bool)
    sh, sw = fg.shape
    gray = L[..., 0] / 100.0
    grad = np.hypot(cv2.Sobel(gray, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(gray, cv2.CV_32F, 0, 1, ksize=3)) / 4.0
    outside = ~cv2.dilate(est.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    crowding, touches = 0.0, 0.0
    if blob:
        x0, y0, x1, y1 = blob.box
        gx, gy = (x1 - x0) // 2 + 1, (y1 - y0) // 2 + 1
        X0, Y0, X1, Y1 = max(0, x0 - gx), max(0, y0 - gy), min(sw, x1 + gx), min(sh, y1 + gy)
        crowding = float((fg[Y0:Y1, X0:X1] & ~est[Y0:Y1, X0:X1]).mean())
        touches = float(x0 == 0 or y0 == 0 or x1 == sw or y1 == sh)
    text_height = 0.0
    if subtask.kind.startswith("text_"):
        heights = [b[3] - b[1] for b in text_lines(image)]
        text_height = float(np.median(heights)) if heights else 0.0
    return {
        "image_pixels": float(h * w),
        "target_area": float(est.mean()),
        "target_components": float(len(cands)),
        "background_uniformity": float(np.clip(1.0 - bg.spread / 30.0, 0.0, 1.0)),
        "background_texture": float(grad[outside].mean()) if outside.any() else 0.0,
        "crowding": crowding,
        "touches_border": touches,
        "text_height": text_height,
        "foreground_share": float(fg.mean()),
    }

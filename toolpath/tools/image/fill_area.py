"""The pixels a fill step repaints, as the fill tools (fill.py, learned.py) and the check that judges them
(quality.py) all see them: the located mask, else the union of the text boxes an earlier stage found."""

from __future__ import annotations

import cv2
import numpy as np

from .edit_base import EditError, EditState

GROW_PX = 2  # the fill covers the mask plus this many pixels, so anti-aliased object edges leave no halo


def fill_mask(state: EditState, grow: int = GROW_PX) -> np.ndarray:
    """The pixels a fill repaints: the located mask, else the union of the text boxes, grown by `grow` px."""
    h, w = state.image.shape[:2]
    if state.mask is not None:
        if state.mask.shape != (h, w):
            raise EditError(f"fill: the mask is {state.mask.shape}, the image {h}×{w}")
        mask = state.mask.astype(bool)
    else:
        mask = np.zeros((h, w), bool)
        for box in state.text_boxes:
            try:
                x0, y0, x1, y1 = (int(v) for v in box[:4])
            except (TypeError, ValueError):
                raise EditError(f"fill: text box {box!r} does not start with x0, y0, x1, y1 in pixels") from None
            mask[max(0, y0):min(h, y1), max(0, x0):min(w, x1)] = True
    if not mask.any():
        raise EditError("fill: nothing to fill (no mask and no text boxes from an earlier stage)")
    if grow > 0:
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1))
        mask = cv2.dilate(mask.astype(np.uint8), kernel).astype(bool)
    return mask

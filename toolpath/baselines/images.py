"""Reading the image an agent attached to its message, for offline policies that look at pixels."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def read_rgb(path: str | None, what: str, error: type[Exception], min_side: int = 2) -> np.ndarray:
    """The image at `path` as HxWx3 uint8; `error(message)` naming `what` when it is missing, unreadable or
    smaller than `min_side` pixels a side (a policy answers that in words instead of guessing)."""
    from PIL import Image

    if not path:
        raise error(f"the message has no {what}")
    try:
        with Image.open(path) as im:
            rgb = np.asarray(im.convert("RGB"))
    except (OSError, ValueError, Image.DecompressionBombError) as err:
        raise error(f"cannot read the {what} {Path(path).name}: {err}") from None
    if rgb.ndim != 3 or rgb.shape[0] < min_side or rgb.shape[1] < min_side:
        raise error(f"the {what} {Path(path).name} is too small to look at ({rgb.shape[1]}x{rgb.shape[0]})")
    return rgb

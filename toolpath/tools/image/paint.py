"""Tools that repaint pixels: stages "recolor", "draw" (replace), "background" and "upscale".

recolor (inside state.mask, nothing outside it changes)
- `recolor_hsv`: hue to the target's; saturation and value scaled so that their medians become the target's
  (an achromatic target — black, white, gray — gets its own low saturation), which keeps the object's
  shading and texture as relative variations.
- `recolor_lab`: a*/b* moved so that their medians are the target's, and L shifted likewise; every pixel
  keeps its offset from the median (shading, texture) in all three channels.
draw
- `draw_shape`: params["shape"] in params["color"], anti-aliased, filling the located object's bounding box
  (circle, square, star, triangle in the centred square of its shorter side; ellipse, rectangle in the box).
background (state.mask = the foreground)
- `set_background`: every pixel outside the mask becomes params["color"] (white by default).
- `set_background_feathered`: the same through a blurred alpha, so edges blend instead of stepping.
upscale
- `upscale_cubic`, `upscale_lanczos`, `upscale_lanczos_sharpen` (Lanczos plus an unsharp mask) by
  params["factor"], a number with 1 < factor ≤ 4.
"""

from __future__ import annotations

import math
import numbers

import cv2
import numpy as np

from .edit_base import COLORS, EditError, EditState, EditTool, Subtask, register_edit_tool
from .features import (
    lab,
    mask_box,
    require_color,
    require_image,
    require_mask,
    require_shape,
    shape_box,
    shape_coverage,
)
from .quality import check_background, check_draw, check_recolor, check_upscale

MAX_FACTOR = 4.0
ACHROMATIC_S = 0.12  # a target colour with less HSV saturation than this is black, white or gray


def _recolor_inputs(state: EditState, subtask: Subtask, tool: str):
    image = require_image(state, tool)
    mask = require_mask(state, tool)
    color = require_color(subtask.params.get("color"), tool, "target colour (params['color'])")
    return image, mask, color


def _hsv(rgb: np.ndarray) -> np.ndarray:
    """float HSV: H in degrees [0, 360), S and V in [0, 1]."""
    return cv2.cvtColor(rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2HSV)


def _to_rgb8(a: np.ndarray, code: int) -> np.ndarray:
    return np.clip(cv2.cvtColor(a.astype(np.float32), code) * 255.0 + 0.5, 0, 255).astype(np.uint8)


def _recolored(state: EditState, image: np.ndarray, mask: np.ndarray, new: np.ndarray, tool: str,
               color: str) -> EditState:
    out = image.copy()
    out[mask] = new[mask]
    return state.evolve(image=out, info={**state.info, tool: {"color": color, "pixels": int(mask.sum())}})


def recolor_hsv(state: EditState, subtask: Subtask) -> EditState:
    image, mask, color = _recolor_inputs(state, subtask, "recolor_hsv")
    hsv = _hsv(image)
    th, ts, tv = _hsv(np.array([[COLORS[color]]], np.uint8))[0, 0]
    s_med, v_med = (float(np.median(hsv[..., i][mask])) for i in (1, 2))
    out = hsv.copy()
    if ts >= ACHROMATIC_S:
        out[..., 0] = th
        # a grey object has no saturation to scale: it gets the target's, flat
        out[..., 1] = np.clip(hsv[..., 1] * ts / s_med, 0, 1) if s_med > 0.1 else ts
    else:
        out[..., 1] = ts
    out[..., 2] = np.clip(hsv[..., 2] * tv / max(v_med, 0.02), 0, 1)
    return _recolored(state, image, mask, _to_rgb8(out, cv2.COLOR_HSV2RGB), "recolor_hsv", color)


def recolor_lab(state: EditState, subtask: Subtask) -> EditState:
    image, mask, color = _recolor_inputs(state, subtask, "recolor_lab")
    L = lab(image)
    target = lab(np.array([[COLORS[color]]], np.uint8))[0, 0]
    shift = target - np.median(L[mask], axis=0)
    return _recolored(state, image, mask, _to_rgb8(L + shift, cv2.COLOR_Lab2RGB), "recolor_lab", color)


def draw_shape(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "draw_shape")
    mask = require_mask(state, "draw_shape", "the located object (its box is where the new shape goes)")
    shape = require_shape(subtask.params.get("shape"), "draw_shape")
    color = require_color(subtask.params.get("color"), "draw_shape")
    box = shape_box(shape, mask_box(mask))
    alpha = shape_coverage(shape, box, image.shape[:2])[..., None]
    out = image * (1 - alpha) + np.array(COLORS[color], np.float32) * alpha
    return state.evolve(image=np.clip(out + 0.5, 0, 255).astype(np.uint8),
                        info={**state.info, "draw_shape": {"shape": shape, "color": color, "box": list(box)}})


def _background_inputs(state: EditState, subtask: Subtask, tool: str):
    image = require_image(state, tool)
    mask = require_mask(state, tool, "the foreground")
    color = require_color(subtask.params.get("color", "white"), tool, "background colour (params['color'])")
    return image, mask, color


def set_background(state: EditState, subtask: Subtask) -> EditState:
    image, mask, color = _background_inputs(state, subtask, "set_background")
    out = np.where(mask[..., None], image, np.array(COLORS[color], np.uint8))
    return state.evolve(image=out.astype(np.uint8), info={**state.info, "set_background": {"color": color}})


FEATHER_SIGMA = 1.2  # px: enough to hide the staircase of a binary mask, too little to haze the object


def set_background_feathered(state: EditState, subtask: Subtask) -> EditState:
    image, mask, color = _background_inputs(state, subtask, "set_background_feathered")
    alpha = cv2.GaussianBlur(mask.astype(np.float32), (0, 0), FEATHER_SIGMA)[..., None]
    out = image * alpha + np.array(COLORS[color], np.float32) * (1 - alpha)
    return state.evolve(image=np.clip(out + 0.5, 0, 255).astype(np.uint8),
                        info={**state.info, "set_background_feathered": {"color": color, "sigma": FEATHER_SIGMA}})


# ---- upscaling --------------------------------------------------------------------------------------------

def upscale_factor(subtask: Subtask, tool: str) -> float:
    f = subtask.params.get("factor", 2)
    if isinstance(f, bool) or not isinstance(f, numbers.Real) or not math.isfinite(f) or not 1.0 < f <= MAX_FACTOR:
        raise EditError(f"{tool}: params['factor'] must be a number with 1 < factor ≤ {MAX_FACTOR:g}, got {f!r}")
    return float(f)


def _upscale(state: EditState, subtask: Subtask, tool: str, interpolation: int, sharpen: float = 0.0) -> EditState:
    image = require_image(state, tool)
    f = upscale_factor(subtask, tool)
    h, w = image.shape[:2]
    out = cv2.resize(image, (round(w * f), round(h * f)), interpolation=interpolation)
    if sharpen:
        soft = cv2.GaussianBlur(out, (0, 0), 0.5 * f)
        out = cv2.addWeighted(out, 1.0 + sharpen, soft, -sharpen, 0)
    # masks and boxes are in the old pixels; later stages of this subtask have none to use
    return state.evolve(image=out, mask=None, text_boxes=[], info={**state.info, tool: {"factor": f}})


def upscale_cubic(state: EditState, subtask: Subtask) -> EditState:
    return _upscale(state, subtask, "upscale_cubic", cv2.INTER_CUBIC)


def upscale_lanczos(state: EditState, subtask: Subtask) -> EditState:
    return _upscale(state, subtask, "upscale_lanczos", cv2.INTER_LANCZOS4)


def upscale_lanczos_sharpen(state: EditState, subtask: Subtask) -> EditState:
    return _upscale(state, subtask, "upscale_lanczos_sharpen", cv2.INTER_LANCZOS4, sharpen=0.6)


# ---- registration (the first of a stage is the default of a fixed tool chain) --------------------------------

register_edit_tool(EditTool(
    name="recolor_hsv", stage="recolor", kinds=("recolor",), fn=recolor_hsv, check=check_recolor, cost=0.02,
    quality=0.9, description="hue to the target's, saturation and value scaled to it: shading kept"))
register_edit_tool(EditTool(
    name="recolor_lab", stage="recolor", kinds=("recolor",), fn=recolor_lab, check=check_recolor, cost=0.02,
    quality=0.9, description="CIELAB medians moved to the target's: every pixel keeps its offset (shading)"))
register_edit_tool(EditTool(
    name="draw_shape", stage="draw", kinds=("replace",), fn=draw_shape, check=check_draw, cost=0.01, quality=0.9,
    description="the new shape in the new colour, anti-aliased, in the located object's box"))
register_edit_tool(EditTool(
    name="set_background", stage="background", kinds=("background",), fn=set_background, check=check_background,
    cost=0.005, quality=0.9, description="every pixel outside the foreground mask becomes the colour"))
register_edit_tool(EditTool(
    name="set_background_feathered", stage="background", kinds=("background",), fn=set_background_feathered,
    check=check_background, cost=0.01, quality=0.9, description="the colour through a blurred alpha: soft edges"))
register_edit_tool(EditTool(
    name="upscale_cubic", stage="upscale", kinds=("upscale",), fn=upscale_cubic, check=check_upscale, cost=0.005,
    quality=0.9, description="bicubic resize by params['factor'] (1 < f ≤ 4)"))
register_edit_tool(EditTool(
    name="upscale_lanczos", stage="upscale", kinds=("upscale",), fn=upscale_lanczos, check=check_upscale, cost=0.01,
    quality=0.9, description="Lanczos-4 resize by params['factor'] (1 < f ≤ 4)"))
register_edit_tool(EditTool(
    name="upscale_lanczos_sharpen", stage="upscale", kinds=("upscale",), fn=upscale_lanczos_sharpen,
    check=check_upscale, cost=0.02, quality=0.9, description="Lanczos-4 resize then an unsharp mask"))

"""inr_fit and inr_restore: an image as an implicit neural representation, as tools any agent can call.

Both read an episode image by name and write their result as a new image artifact (image/ops.py's helpers).
They run on the CPU within MAX_SECONDS (less when the step's deadline is nearer) and say when that cut the fit
short. Sizes are bounded so a call fits that budget: at most MAX_PIXELS input pixels, and super-resolution
outputs at most MAX_SR_PIXELS (each of its steps renders the whole output). COSMO's band prior is used when
TOOLPATH_INR_PRIOR names a ResNet-34 weights file (prior.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ...deadline import clamp
from ..image.ops import image_result, open_image
from ..registry import ToolContext, ToolError, ToolResult, tool
from .names import ACTIVATIONS

if TYPE_CHECKING:
    import numpy as np

MAX_PIXELS = 256 * 256  # what a fit of a few hundred steps handles within MAX_SECONDS on two cores
MAX_SR_PIXELS = 512 * 512
MAX_SECONDS = 240.0
MAX_STEPS = 5000
MAX_SCALE = 8
TASKS = ("denoise", "super_resolution", "inpaint")
PRIOR_ENV = "TOOLPATH_INR_PRIOR"


def _checked(ctx: ToolContext, image: str, activation: str, steps: int) -> np.ndarray:
    import numpy as np

    if activation not in ACTIVATIONS:
        raise ToolError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")
    if not 1 <= steps <= MAX_STEPS:
        raise ToolError(f"steps must be between 1 and {MAX_STEPS}, got {steps}")
    im = open_image(ctx, image)
    if im.width * im.height > MAX_PIXELS:
        raise ToolError(f"{image} is {im.width}x{im.height} ({im.width * im.height} pixels); an INR fit on the CPU "
                        f"takes at most {MAX_PIXELS} pixels (256x256): crop it first")
    return np.asarray(im)


def _options(ctx: ToolContext, activation: str) -> dict:
    options: dict = {"seconds": clamp(MAX_SECONDS, ctx.deadline)}
    prior = os.environ.get(PRIOR_ENV)
    if prior and activation == "cosmo":
        options["prior_weights"] = prior
    return options


def _run(fn, *args, **kwargs):
    """A restore/fit call with its refusals (a bad mask, a bad prior file) as the agent's error."""
    try:
        return fn(*args, **kwargs)
    except ValueError as e:
        raise ToolError(str(e)) from e


def _to_pil(array: np.ndarray):
    import numpy as np
    from PIL import Image

    a = (np.clip(array, 0, 1) * 255 + 0.5).astype(np.uint8)
    return Image.fromarray(a[:, :, 0] if a.shape[2] == 1 else a)


@tool(timeout=MAX_SECONDS + 30, cost=2.0, quality=0.8, tags=("image",))
def inr_fit(image: str, ctx: ToolContext, activation: str = "cosmo", steps: int = 300, seed: int = 0) -> ToolResult:
    """Fit an implicit neural representation (an MLP from pixel coordinates to colour) to an image and
    return its reconstruction, with PSNR and SSIM against the input.

    Args:
        image: the image's name, e.g. image_1 (at most 256x256 pixels)
        activation: cosmo, siren, wire, gauss or finer
        steps: Adam steps (1-5000); the fit also stops when its time budget runs out
        seed: the same seed gives the same fit
    """
    from .fit import as_float_image, fit
    from .metrics import psnr, ssim

    pixels = _checked(ctx, image, activation, steps)
    f = _run(fit, pixels, activation, steps, seed, **_options(ctx, activation))
    reference = as_float_image(pixels)
    out = f.render(*reference.shape[:2])
    p, s = psnr(out, reference), ssim(out, reference)
    result = image_result(ctx, "inr_fit", _to_pil(out),
                           f"{activation} INR of {image}: PSNR {p:.2f} dB, SSIM {s:.3f}; {f.account()}.")
    result.data = {"psnr": p, "ssim": s, "steps": f.steps, "stopped": f.stopped, "activation": activation,
                   "parameters": sum(q.numel() for q in f.model.parameters())}
    return result


@tool(timeout=MAX_SECONDS + 30, cost=2.0, quality=0.7, tags=("image",))
def inr_restore(image: str, task: str, ctx: ToolContext, scale: int = 2, mask: str | None = None,
                activation: str = "cosmo", steps: int = 300, seed: int = 0) -> ToolResult:
    """Restore an image with an implicit neural representation fitted to it.

    Args:
        image: the image's name, e.g. image_1 (at most 256x256 pixels)
        task: denoise, super_resolution (render at `scale` times the size) or inpaint (fill the pixels `mask` marks)
        scale: for super_resolution, the upscaling factor (2-8)
        mask: for inpaint, the name of an image of the same size whose white pixels are the ones to fill
        activation: cosmo, siren, wire, gauss or finer
        steps: Adam steps (1-5000); the fit also stops when its time budget runs out
        seed: the same seed gives the same result
    """
    import numpy as np

    from . import restore

    if task not in TASKS:
        raise ToolError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    pixels = _checked(ctx, image, activation, steps)
    h, w = pixels.shape[:2]
    options = _options(ctx, activation)
    if task == "super_resolution":
        if not 2 <= scale <= MAX_SCALE:
            raise ToolError(f"scale must be between 2 and {MAX_SCALE}, got {scale}")
        if h * w * scale * scale > MAX_SR_PIXELS:
            raise ToolError(f"{image} at {scale}x would be {w * scale}x{h * scale}; super-resolution outputs are at "
                            f"most {MAX_SR_PIXELS} pixels (512x512): crop it or lower the scale")
        out, f = _run(restore.super_resolve, pixels, scale, activation, steps, seed, **options)
        what = f"{scale}x super-resolution of {image}"
    elif task == "inpaint":
        if not mask:
            raise ToolError("inpaint needs mask: the name of an image whose white pixels are the ones to fill")
        holes = np.asarray(open_image(ctx, mask).convert("L")) > 127
        if holes.shape != (h, w):
            raise ToolError(f"mask {mask} is {holes.shape[1]}x{holes.shape[0]}, {image} is {w}x{h}: they must match")
        if holes.all():
            raise ToolError(f"mask {mask} marks every pixel: there is nothing known to fit")
        out, f = _run(restore.inpaint, pixels, ~holes, activation, steps, seed, **options)
        what = f"{image} with the {int(holes.sum())} pixels of {mask} filled"
    else:
        out, f = _run(restore.denoise, pixels, activation, steps, seed, **options)
        what = f"{image} denoised"
    result = image_result(ctx, "inr_restore", _to_pil(out), f"{what} by a {activation} INR; {f.account()}.")
    result.data = {"task": task, "steps": f.steps, "stopped": f.stopped, "activation": activation}
    return result

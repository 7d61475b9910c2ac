"""crop, zoom, rotate, contrast, measure: each reads an image by name and writes a new one as an artifact.

Names: the task's images are `image_1, image_2, …`; every image a tool returns gets a new name (`crop_1`,
`zoom_2`, …) that later calls can use. Bad arguments (an unknown name, a box outside the image, a factor out
of range) come back as errors naming the argument and the allowed range.
"""

from __future__ import annotations

import io
from pathlib import Path

from ..registry import ToolContext, ToolError, ToolResult, tool

_MAX_SIDE = 4096  # no operation makes an image larger than this on either side


def open_image(ctx: ToolContext, name: str):
    """The episode's image of that name (image_1, crop_2, …), loaded, in RGB or L; unknown names are a ToolError."""
    from PIL import Image

    im = Image.open(ctx.images[ctx.image_name(name)])
    im.load()
    return im.convert("RGB") if im.mode not in ("RGB", "L") else im


def image_result(ctx: ToolContext, kind: str, im, text: str) -> ToolResult:
    """A new image of the episode, named KIND_N and stored as an artifact, with `text` after its size."""
    n = sum(1 for k in ctx.images if k.startswith(kind + "_")) + 1
    name = f"{kind}_{n}"
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    ref = ctx.artifact(buf.getvalue(), name=f"{name}.png", mime="image/png")
    ctx.images[name] = Path(ref.path)
    return ToolResult(content=f"{name}: {im.width}x{im.height} image. {text}".strip(), artifacts=[ref])


def _box(box: list[int], w: int, h: int) -> tuple[int, int, int, int]:
    if len(box) != 4:
        raise ToolError(f"box must be [left, top, right, bottom], got {len(box)} numbers")
    x0, y0, x1, y1 = box
    if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
        raise ToolError(f"box {box} is not inside the {w}x{h} image with left < right and top < bottom")
    return x0, y0, x1, y1


@tool(timeout=20.0, cost=0.05, quality=0.95, tags=("image",))
def crop(image: str, box: list[int], ctx: ToolContext) -> ToolResult:
    """Cut out a rectangle of an image.

    Args:
        image: the image's name, e.g. image_1
        box: [left, top, right, bottom] in pixels; right and bottom are exclusive
    """
    im = open_image(ctx, image)
    return image_result(ctx, "crop", im.crop(_box(box, im.width, im.height)), f"cropped {image} to {box}.")


@tool(timeout=20.0, cost=0.05, quality=0.9, tags=("image",))
def zoom(image: str, factor: float, ctx: ToolContext, x: int | None = None, y: int | None = None) -> ToolResult:
    """Magnify part of an image around a point (the centre by default).

    Args:
        image: the image's name
        factor: magnification, more than 1 and at most 8
        x: the point to zoom on, in pixels from the left
        y: the point to zoom on, in pixels from the top
    """
    from PIL import Image

    if not 1.0 < factor <= 8.0:
        raise ToolError(f"factor must be more than 1 and at most 8, got {factor}")
    im = open_image(ctx, image)
    cx = im.width // 2 if x is None else x
    cy = im.height // 2 if y is None else y
    if not (0 <= cx < im.width and 0 <= cy < im.height):
        raise ToolError(f"point ({cx}, {cy}) is outside the {im.width}x{im.height} image")
    w, h = max(1, round(im.width / factor)), max(1, round(im.height / factor))
    x0 = min(max(0, cx - w // 2), im.width - w)
    y0 = min(max(0, cy - h // 2), im.height - h)
    part = im.crop((x0, y0, x0 + w, y0 + h))
    size = (min(_MAX_SIDE, round(w * factor)), min(_MAX_SIDE, round(h * factor)))
    return image_result(ctx, "zoom", part.resize(size, Image.LANCZOS),
                   f"{factor:g}x around ({cx}, {cy}); shows [{x0}, {y0}, {x0 + w}, {y0 + h}] of {image}.")


@tool(timeout=20.0, cost=0.05, quality=0.95, tags=("image",))
def rotate(image: str, degrees: float, ctx: ToolContext) -> ToolResult:
    """Rotate an image counter-clockwise; the canvas grows to keep every pixel.

    Args:
        image: the image's name
        degrees: angle, -360 to 360
    """
    if not -360 <= degrees <= 360:
        raise ToolError(f"degrees must be between -360 and 360, got {degrees}")
    im = open_image(ctx, image)
    return image_result(ctx, "rotate", im.rotate(degrees, expand=True, fillcolor="white" if im.mode == "RGB" else 255),
                   f"{image} rotated {degrees:g} degrees.")


@tool(timeout=20.0, cost=0.05, quality=0.9, tags=("image",))
def contrast(image: str, factor: float, ctx: ToolContext) -> ToolResult:
    """Change an image's contrast (1 keeps it, 2 doubles it, 0.5 halves it).

    Args:
        image: the image's name
        factor: 0.1 to 5
    """
    from PIL import ImageEnhance

    if not 0.1 <= factor <= 5.0:
        raise ToolError(f"factor must be between 0.1 and 5, got {factor}")
    im = open_image(ctx, image)
    return image_result(ctx, "contrast", ImageEnhance.Contrast(im).enhance(factor),
                        f"{image} with contrast x{factor:g}.")


_COLORS = {"red": (220, 30, 30), "green": (30, 160, 60), "blue": (30, 60, 220), "black": (0, 0, 0),
           "white": (255, 255, 255), "yellow": (230, 210, 40), "gray": (128, 128, 128)}


@tool(timeout=20.0, cost=0.05, quality=0.85, tags=("image",))
def measure(image: str, ctx: ToolContext, color: str | None = None, tolerance: int = 60) -> ToolResult:
    """Measure an image: its size and mean colour, and with `color`, where pixels of that colour are.

    Args:
        image: the image's name
        color: a name (red, green, blue, black, white, yellow, gray) or #rrggbb
        tolerance: how far (0-255 per channel) a pixel may be from the colour and still count
    """
    import numpy as np

    if not 0 <= tolerance <= 255:
        raise ToolError(f"tolerance must be between 0 and 255, got {tolerance}")
    im = open_image(ctx, image).convert("RGB")
    a = np.asarray(im).astype(int)
    mean = [round(float(v), 1) for v in a.reshape(-1, 3).mean(axis=0)]
    lines = [f"{image}: {im.width}x{im.height} pixels, mean RGB {mean}"]
    data = {"width": im.width, "height": im.height, "mean_rgb": mean}
    if color is not None:
        key = color.strip().lower()
        if key in _COLORS:
            rgb = _COLORS[key]
        elif len(key) == 7 and key.startswith("#"):
            try:
                rgb = tuple(int(key[i:i + 2], 16) for i in (1, 3, 5))
            except ValueError:
                raise ToolError(f"color {color!r} is not #rrggbb") from None
        else:
            raise ToolError(f"unknown color {color!r}; use one of {', '.join(_COLORS)} or #rrggbb")
        mask = (np.abs(a - np.array(rgb)) <= tolerance).all(axis=2)
        count = int(mask.sum())
        data.update(color=color, pixels=count)
        if count:
            ys, xs = np.where(mask)
            box = [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]
            data.update(box=box, box_width=box[2] - box[0], box_height=box[3] - box[1])
            lines.append(f"{color} pixels: {count}; their bounding box [left, top, right, bottom] = {box}, "
                         f"{box[2] - box[0]} wide and {box[3] - box[1]} high")
        else:
            lines.append(f"no {color} pixels within tolerance {tolerance}")
    return ToolResult(content="\n".join(lines), data=data)

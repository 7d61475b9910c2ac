"""FSD's spatial reasoning as tools: `locate`, `trace`, `relations` on a named image, in FSD's 0-1000 grid.

For a tool-calling model that does not write code and cannot point by itself: the tools find the tabletop's
objects in the image (detect.py: the simulated scene's six colours, cubes told from plates by size and shape)
and answer in the coordinates FSD's grammar uses (coords.CoordinateSpace("grid1000"): x from 0 at the left to
1000 at the right, y from 0 at the top to 1000 at the bottom, whatever the image's size), so their points can go
straight into an FSD answer or the robot tools. The geometry is the FSD offline policies' (scene.py), so a tool
and the `detector` policy give the same points for the same image.

What they cannot do: see objects other than the coloured cubes and plates of the tabletop (a photo of a kitchen
finds nothing; said so, with what was seen). An object the image does not show, or two that match one name,
come back as `found: false` with the reason, never as a guess.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from ..image.ops import image_result, open_image
from ..registry import ToolContext, ToolError, ToolResult, tool

if TYPE_CHECKING:
    from . import scene as S

# numpy and the geometry load with the first call, not with the tool list (`toolpath tools list` stays light).

_GRID = "grid1000: x 0-1000 left to right, y 0-1000 top to bottom"


def _scene(ctx: ToolContext, image: str) -> S.Scene:
    import numpy as np

    from .detect import detect_scene

    rgb = np.asarray(open_image(ctx, image).convert("RGB"))
    if min(rgb.shape[:2]) < 4:
        raise ToolError(f"image {image!r} is too small to look at ({rgb.shape[1]}x{rgb.shape[0]})")
    return detect_scene(rgb)


def _ref(text: str, what: str) -> S.ObjectRef:
    from . import scene as S

    ref = S.object_ref(text)
    if ref.color is None and ref.kind is None:
        raise ToolError(f"{what} {text!r} names no colour ({', '.join(S.COLORS)}) and no kind (cube, plate) "
                        "of the tabletop's objects")
    return ref


def _find(scene: S.Scene, text: str, what: str) -> S.SceneObject:
    obj, why = scene.find(_ref(text, what))
    if obj is None:
        raise _NotFound(f"{why}. {scene.missing}".strip())
    return obj


class _NotFound(Exception):
    """An object the image does not show (or shows twice): an answer, not a bad argument."""


def _grid_point(value: Any, what: str) -> tuple[float, float]:
    """A model's [x, y] on the grid, checked: a pair of finite numbers, each within 0-1000."""
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise ToolError(f"{what} must be an object's name or a point [x, y] on the 0-1000 grid, got {value!r}")
    x, y = (float(v) for v in value)
    for axis, v in (("x", x), ("y", y)):
        if not math.isfinite(v) or not 0 <= v <= 1000:
            raise ToolError(f"{what} {axis} = {v:g} is off the grid (0 to 1000)")
    return x, y


def _answer(data: dict, ctx: ToolContext, image: str, show: bool, **drawn) -> ToolResult:
    text = json.dumps(data, ensure_ascii=False)
    if not show:
        return ToolResult(content=text, data=data)
    import io

    from PIL import Image

    from ..spatial import draw

    im = Image.open(io.BytesIO(draw(open_image(ctx, image), **drawn)))
    shown = image_result(ctx, "marked", im, "")
    return ToolResult(content=f"{text}\n{shown.content}", artifacts=shown.artifacts, data=data)


@tool(timeout=30.0, cost=0.3, quality=0.85, tags=("spatial", "fsd"))
def locate(image: str, object: str, ctx: ToolContext, show: bool = False) -> ToolResult:
    """Find an object of the tabletop in an image: a point on it (where to grasp it) and its box, on FSD's 0-1000
    grid (x right, y down).

    Args:
        image: the image's name, e.g. image_1
        object: the object, by colour and kind, e.g. "red cube", "the blue plate"
        show: also return the image with the point and box drawn on it, as a new named image
    """
    from . import scene as S
    from .masks import bbox

    scene = _scene(ctx, image)
    try:
        obj = _find(scene, object, "object")
    except _NotFound as why:
        return ToolResult(content=json.dumps({"found": False, "object": object, "why": str(why)}),
                          data={"found": False, "object": object, "why": str(why)})
    u, v = S.grasp_point(obj)
    data = {"found": True, "object": obj.name, "point": S.grid(scene, u, v), "box": S.grid_box(scene, obj),
            "coordinates": _GRID}
    return _answer(data, ctx, image, show, points=[(u, v)], boxes=[bbox(obj.mask)], labels=[obj.name])


@tool(timeout=30.0, cost=0.3, quality=0.8, tags=("spatial", "fsd"))
def trace(image: str, ctx: ToolContext, instruction: str = "", start: str | list[float] | None = None,
          goal: str | list[float] | None = None, points: int = 8, show: bool = False) -> ToolResult:
    """FSD's visual trace: ordered points on the 0-1000 grid from where to grasp the object to pick up to where it
    goes, raised over the way. Give an instruction ("put the red cube on the blue plate"), or start and goal.

    Args:
        image: the image's name, e.g. image_1
        instruction: a pick-and-place instruction naming both objects, e.g. "put the red cube on the blue plate"
        start: instead of an instruction: the object to pick up ("red cube") or a point [x, y] on the grid
        goal: instead of an instruction: where it goes, an object ("blue plate") or a point [x, y] on the grid
        points: how many points, 2 to 32 (FSD's traces have 8)
        show: also return the image with the trace drawn on it, as a new named image
    """
    from . import scene as S

    if not 2 <= points <= 32:
        raise ToolError(f"points must be between 2 and 32, got {points}")
    if instruction.strip():
        if start is not None or goal is not None:
            raise ToolError("give an instruction, or start and goal, not both")
        try:
            pick_ref, target_ref = S.parse_instruction(instruction)
        except S.Unanswerable as err:
            raise ToolError(f"instruction: {err}") from None
        start, goal = pick_ref.text, target_ref.text
    elif start is None or goal is None:
        raise ToolError("trace needs an instruction, or both start and goal")
    ends = {"start": start, "goal": goal}
    points_given = {k: _grid_point(v, k) for k, v in ends.items() if not isinstance(v, str)}
    for k, v in ends.items():  # names are checked before the image is read: a bad argument costs nothing
        if isinstance(v, str):
            _ref(v, k)
    scene = _scene(ctx, image)
    space = scene.space
    try:
        pick = _find(scene, start, "start") if isinstance(start, str) else None
        target = _find(scene, goal, "goal") if isinstance(goal, str) else None
        if pick is not None and pick is target:
            raise _NotFound(f"start and goal are the same object ({pick.name})")
        a = S.grasp_point(pick) if pick is not None else space.to_screen(*points_given["start"])
        if target is not None:
            b, _, _ = S.destination(scene, target, pick)
        else:
            b = space.to_screen(*points_given["goal"])
    except (_NotFound, S.Unanswerable) as why:
        data = {"found": False, "why": str(why)}
        return ToolResult(content=json.dumps(data), data=data)
    pixels = S.trace(a, b, scene.width, scene.height, n=points)
    data = {"found": True, "start": pick.name if pick else list(points_given["start"]),
            "goal": target.name if target else list(points_given["goal"]),
            "trace": [S.grid(scene, u, v) for u, v in pixels], "coordinates": _GRID}
    return _answer(data, ctx, image, show, trace=pixels)


@tool(timeout=30.0, cost=0.3, quality=0.8, tags=("spatial", "fsd"))
def relations(image: str, ctx: ToolContext, objects: list[str] | None = None, show: bool = False) -> ToolResult:
    """How the tabletop's objects are placed relative to each other (on, left of, right of, in front of, behind, as
    the camera sees them), with each object's box on the 0-1000 grid.

    Args:
        image: the image's name, e.g. image_1
        objects: the objects to relate, by colour and kind (e.g. ["red cube", "blue plate"]); all that are seen when
            left out
        show: also return the image with the objects' boxes drawn on it, as a new named image
    """
    from . import scene as S
    from .masks import bbox

    if objects is not None and len(objects) < 2:
        raise ToolError(f"objects: name at least two objects to relate, got {len(objects)}")
    for name in objects or []:
        _ref(name, "object")
    scene = _scene(ctx, image)
    found, missing = (list(scene.objects), []) if objects is None else ([], [])
    for name in objects or []:
        obj, why = scene.find(_ref(name, "object"))
        if obj is None:
            missing.append({"object": name, "why": why})
        elif obj not in found:
            found.append(obj)
    rels = [list(r) for i, a in enumerate(found) for b in found[i + 1:] for r in S.relations(scene, a, b)]
    data: dict[str, Any] = {"objects": [{"name": o.name, "box": S.grid_box(scene, o)} for o in found],
                            "relations": rels, "coordinates": _GRID}
    if missing:
        data["missing"] = missing
    if not found:
        data["seen"] = f"no objects ({scene.missing})"
    return _answer(data, ctx, image, show, boxes=[bbox(o.mask) for o in found], labels=[o.name for o in found])

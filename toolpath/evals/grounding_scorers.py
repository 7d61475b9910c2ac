"""GUI grounding scorers: OSWorld-G, ScreenSpot v1/v2/Pro. A point answer against a box, a polygon or a refusal,
in toolpath's way or (options["scoring"] == "official") as the published evaluator does (grounding_official).

The answer is model output: untrusted text of any shape. Scorers never raise on it; they score it 0.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .grounding_official import official_verdict


def _finite_pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        return float(value[0]), float(value[1])
    return None


def grounding_answer(answer: Any) -> tuple[tuple[float, float] | None, bool]:
    """(point, refused) from a grounding run's answer: JSON {"point": [x, y]} in pixels of the original image,
    or {"refused": true, ...}. Anything else (text, garbled JSON, a bad point) is neither: (None, False)."""
    data = answer
    if isinstance(answer, str):
        try:
            data = json.loads(answer)
        except ValueError:
            return None, False
    if not isinstance(data, dict):
        return None, False
    if data.get("refused") is True:
        return None, True
    return _finite_pair(data.get("point")), False


def point_in_box(point: tuple[float, float], box: Any) -> bool:
    """Whether a point lies in an [x1, y1, x2, y2] box, edges included (ScreenSpot's and OSWorld-G's test)."""
    x, y = point
    x1, y1, x2, y2 = (float(v) for v in box)
    return min(x1, x2) <= x <= max(x1, x2) and min(y1, y2) <= y <= max(y1, y2)


def _on_segment(x: float, y: float, ax: float, ay: float, bx: float, by: float) -> bool:
    cross = (bx - ax) * (y - ay) - (by - ay) * (x - ax)
    scale = max(abs(bx - ax), abs(by - ay), 1.0)
    return abs(cross) <= 1e-9 * scale * scale and min(ax, bx) <= x <= max(ax, bx) and min(ay, by) <= y <= max(ay, by)


def point_in_polygon(point: tuple[float, float], flat: Any) -> bool:
    """Whether a point lies in a polygon given as a flat [x1, y1, x2, y2, …] list (any simple polygon, concave
    ones included): even-odd ray casting, with the boundary counted as inside, as for boxes."""
    xs, ys = [float(v) for v in flat[0::2]], [float(v) for v in flat[1::2]]
    if len(xs) < 3 or len(xs) != len(ys):
        return False
    x, y = point
    inside = False
    j = len(xs) - 1
    for i in range(len(xs)):
        if _on_segment(x, y, xs[j], ys[j], xs[i], ys[i]):
            return True
        if (ys[i] > y) != (ys[j] > y):
            cross_x = xs[i] + (y - ys[i]) * (xs[j] - xs[i]) / (ys[j] - ys[i])
            if x < cross_x:
                inside = not inside
        j = i
    return inside


def xywh_to_xyxy(box: Any) -> list[float]:
    x, y, w, h = (float(v) for v in box)
    return [x, y, x + w, y + h]


def _toolpath_verdict(point: tuple[float, float] | None, refused: bool, kind: Any, coords: Any,
                      options: dict) -> tuple[float, str]:
    if kind == "refusal":
        why = "declined, as the item asks" if refused else "the item asks to decline; the answer did not"
        return float(refused), why
    if refused:
        return 0.0, "declined, but the element is on the screen"
    if point is None:
        return 0.0, "no point in the answer"
    if kind == "bbox":
        box = list(coords) if options.get("bbox_format") == "xyxy" else xywh_to_xyxy(coords)
        hit = point_in_box(point, box)
    elif kind == "polygon":
        hit = point_in_polygon(point, coords)
    else:
        return 0.0, f"unreadable expected value: box_type {kind!r}"
    return float(hit), f"point {list(point)} {'in' if hit else 'outside'} the {kind}"


def grounding_verdict(answer: Any, expected: Any, options: dict) -> tuple[float, str]:
    """(score, why) of a grounding answer in the scoring mode options["scoring"] names ("toolpath" default).

    `expected` is {"box_type": "bbox" | "polygon" | "refusal", "box_coordinates": ...}, bbox as [x, y, w, h]
    (`options.bbox_format: "xyxy"` for ScreenSpot-Pro's [x1, y1, x2, y2]).

    toolpath: a point inside the box or polygon, its boundary included, scores 1 (boxes in either corner
    order); a refusal item scores 1 only when the answer declines ({"refused": true}), and a decline scores 0
    everywhere else; anything that is neither a point nor a decline scores 0.
    official: the evaluator options["evaluator"] names (osworld_g, seeclick, screenspot_pro), reproduced in
    grounding_official with each of its quirks; options["image_size"] is the image's [width, height], which
    all three read. Where they part from toolpath, case by case:
      - OSWorld-G's half-open ray cast puts points on a polygon's right and bottom edges outside (toolpath:
        inside, as on every edge);
      - OSWorld-G reads a pixel click with both coordinates in [0, 1] as relative to the image (toolpath:
        pixels, as the answer says);
      - OSWorld-G scores an answer with no point as a click at (0, 0) (toolpath: 0);
      - on an OSWorld-G refusal item, OSWorld-G takes any click above and left of the screen as a decline
        (toolpath: only {"refused": true});
      - a box with a negative width or height, or ScreenSpot-Pro corners swapped, is empty (toolpath: the
        same rectangle with its corners ordered);
      - SeeClick and ScreenSpot-Pro compare fractions of the image, so a point outside an edge by less than the
        rounding of that division counts as inside (toolpath: compared in pixels).
    An unreadable expected value scores 0 with the reason, in either mode; the answer never raises."""
    point, refused = grounding_answer(answer)
    if not isinstance(expected, dict):
        return 0.0, f"unreadable expected value: {type(expected).__name__}, not a dict"
    kind, coords = expected.get("box_type"), expected.get("box_coordinates")
    try:
        if options.get("scoring", "toolpath") == "official":
            value = official_verdict(point, refused, expected, options)
            return value, f"official {options.get('evaluator', 'osworld_g')}: {'hit' if value else 'miss'}"
        return _toolpath_verdict(point, refused, kind, coords, options)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError) as err:
        return 0.0, f"unreadable expected value {expected!r}: {err}"


def grounding(answer: str | None, expected: Any, options: dict) -> float:
    """The evaluator "grounding": the score of grounding_verdict (its docstring says how, in both modes)."""
    return grounding_verdict(answer, expected, options)[0]

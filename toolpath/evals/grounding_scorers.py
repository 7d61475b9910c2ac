"""GUI grounding scorers: OSWorld-G, ScreenSpot v1/v2/Pro. A point answer against a box, a polygon or a refusal.

The answer is model output: untrusted text of any shape. Scorers never raise on it; they score it 0.
"""

from __future__ import annotations

import json
import math
from typing import Any


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


def grounding(answer: str | None, expected: Any, options: dict) -> float:
    """OSWorld-G / ScreenSpot: `expected` is {"box_type": "bbox" | "polygon" | "refusal", "box_coordinates":
    ...} with bbox as [x, y, w, h] (`options.bbox_format: "xyxy"` for ScreenSpot-Pro's [x1, y1, x2, y2]).
    A point inside the box or polygon scores 1; a refusal item scores 1 only when the answer declines,
    and a declined answer scores 0 everywhere else."""
    point, refused = grounding_answer(answer)
    if not isinstance(expected, dict):
        return 0.0
    kind, coords = expected.get("box_type"), expected.get("box_coordinates")
    if kind == "refusal":
        return float(refused)
    if point is None:
        return 0.0
    try:
        if kind == "bbox":
            box = list(coords) if options.get("bbox_format") == "xyxy" else xywh_to_xyxy(coords)
            return float(point_in_box(point, box))
        if kind == "polygon":
            return float(point_in_polygon(point, coords))
    except (TypeError, ValueError):
        return 0.0
    return 0.0

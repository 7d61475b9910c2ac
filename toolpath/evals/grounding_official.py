"""The published GUI grounding evaluators, reproduced exactly (their quirks included) for `official` scoring.

Three evaluators, each named by the key an evaluator's options carry ("evaluator"):

  osworld_g       OSWorld-G's GroundingEval._eval (xlang-ai/OSWorld-G; the same method is in its VLMEvalKit port)
  seeclick        SeeClick's ScreenSpot test (njucckevin/SeeClick, pretrain/screenspot_test.py), which
                  ScreenSpot v1 and v2 are scored with
  screenspot_pro  ScreenSpot-Pro's eval_sample_positive_gt, and eval_sample_negative_gt for a negative item (no
                  target on the screen) (likaixin2000/ScreenSpot-Pro-GUI-Grounding, eval_screenspot_pro.py)

How our answer reaches each. A grounding run answers JSON {"point": [x, y]} in pixels of the original image,
{"refused": true, ...}, or something else (no point). The evaluators read a model's reply instead:

  osworld_g       a predicted box [x1, y1, x2, y2] whose centre is the click; a click is the zero-size box
                  [x, y, x, y] (how OSWorld-G's click parser reports a click), a decline is [-1, -1, -1, -1]
                  (its refusal convention: a centre with both coordinates negative), and a reply with no
                  readable point is [0, 0, 0, 0] (the parser's fallback for an unreadable reply).
  seeclick        a point normalised to the image, (x / width, y / height), compared with the box divided
                  by the image's size; a decline or no point is a reply with no coordinates: "wrong format", 0.
  screenspot_pro  response["point"], the same normalised point, or None (a decline or no point): "wrong_format".
                  On a negative item, response["result"]: "negative" for a decline (correct), "positive" for a
                  point (wrong), and none for an answer that is neither ("wrong_format", 0; the GPT-4 wrapper
                  reads a reply without a box as "negative", but our answer says declining in so many words).

Quirks reproduced (the case table tests/data/scoring_cases/ holds a case of each):

  osworld_g   * half-open ray cast: `(yi > y) != (yj > y)` and a strict `x < crossing` put a point on a
                polygon's right or bottom edges (and some vertices) outside, on its left and top edges inside;
                e.g. square (0,0)-(10,10): (10, 5) is outside, (0, 5) inside.
              * coordinates all in [0, 1] are read as fractions of the image: the pixel click (1, 1) on a
                1920x1080 screen is scored at (1920, 1080).
              * a reply with no point is scored as a click at (0, 0): it hits a box at the screen's corner.
              * on a refusal item any click with both coordinates negative counts as a decline.
              * a bbox [x, y, w, h] with a negative w or h is an empty box (no min/max).
  seeclick, screenspot_pro
              * comparison after dividing by the image size: two pixel values a hair apart can round to the
                same fraction, so a point just outside an edge (by under one float step of the fraction)
                counts as inside.
              * edges inclusive; a box given with its corners swapped is empty.
"""

from __future__ import annotations

from typing import Any

EVALUATORS = ("osworld_g", "seeclick", "screenspot_pro")

NO_POINT = [0, 0, 0, 0]  # OSWorld-G: an unreadable reply is read as this box
DECLINE = [-1, -1, -1, -1]  # OSWorld-G: a decline


def osworld_g_prediction(point: tuple[float, float] | None, refused: bool) -> list:
    """The predicted box OSWorld-G's evaluator reads for our answer (see the module's docstring)."""
    if refused:
        return list(DECLINE)
    if point is None:
        return list(NO_POINT)
    return [point[0], point[1], point[0], point[1]]


def _in_polygon_half_open(point: list, polygon: list) -> bool:
    # OSWorld-G's ray cast, operation for operation (its float rounding included): half-open on the edges.
    x, y = point
    n = len(polygon) // 2
    inside = False
    j = n - 1
    for i in range(n):
        xi, yi = polygon[i * 2], polygon[i * 2 + 1]
        xj, yj = polygon[j * 2], polygon[j * 2 + 1]
        if (yi > y) != (yj > y) and x < (xj - xi) * (y - yi) / (yj - yi) + xi:
            inside = not inside
        j = i
    return inside


def osworld_g_hit(prediction: list, box_type: Any, coords: Any, image_size: Any) -> bool:
    """OSWorld-G's verdict on a predicted box. Raises (TypeError, ValueError, IndexError) where the published
    code would on an unreadable item; the caller scores that 0."""
    if all(0 <= c <= 1 for c in prediction):
        # OSWorld-G reads a prediction wholly inside [0, 1] as relative to the image, pixel clicks included
        if image_size is None:
            raise ValueError("a point in [0, 1] is read as relative to the image, whose size is unknown")
        prediction = [c * image_size[i % 2] for i, c in enumerate(prediction)]
    centre = [(prediction[0] + prediction[2]) / 2, (prediction[1] + prediction[3]) / 2]
    if box_type == "bbox":
        rect = [coords[0], coords[1], coords[0] + coords[2], coords[1] + coords[3]]  # no min/max: w < 0 is empty
        return rect[0] <= centre[0] <= rect[2] and rect[1] <= centre[1] <= rect[3]
    if box_type == "polygon":
        return _in_polygon_half_open(centre, list(coords))
    if box_type == "refusal":
        return all(c < 0 for c in centre)  # any click left of and above the screen is a decline
    return False  # the published method returns None: not correct


def normalised_point(point: tuple[float, float], size: Any) -> list:
    """The point as a fraction of the image, as SeeClick and ScreenSpot-Pro compare it."""
    return [point[0] / size[0], point[1] / size[1]]


def seeclick_hit(point: tuple[float, float], bbox_xywh: Any, size: Any) -> bool:
    """SeeClick's ScreenSpot test: [x, y, w, h] to corners, both divided by the image size, edges inclusive."""
    x, y, w, h = bbox_xywh
    corners = [x, y, x + w, y + h]
    box = [corners[0] / size[0], corners[1] / size[1], corners[2] / size[0], corners[3] / size[1]]
    click = normalised_point(point, size)
    return (box[0] <= click[0] <= box[2]) and (box[1] <= click[1] <= box[3])


def screenspot_pro_hit(point: tuple[float, float], bbox_xyxy: Any, size: Any) -> bool:
    """ScreenSpot-Pro's eval_sample_positive_gt: [x1, y1, x2, y2] divided by img_size, edges inclusive."""
    x1, y1, x2, y2 = bbox_xyxy
    box = [x1 / size[0], y1 / size[1], x2 / size[0], y2 / size[1]]
    click = normalised_point(point, size)
    return (box[0] <= click[0] <= box[2]) and (box[1] <= click[1] <= box[3])


def screenspot_pro_result(point: tuple[float, float] | None, refused: bool) -> str:
    """response["result"] as ScreenSpot-Pro's model wrappers would report our answer (module docstring)."""
    return "negative" if refused else "positive" if point is not None else "wrong_format"


def screenspot_pro_negative(point: tuple[float, float] | None, refused: bool) -> bool:
    """ScreenSpot-Pro's eval_sample_negative_gt: only a "negative" result is correct."""
    return screenspot_pro_result(point, refused) == "negative"


def official_verdict(point: tuple[float, float] | None, refused: bool, expected: dict, options: dict) -> float:
    """1.0 or 0.0 as the evaluator named in options["evaluator"] scores the answer; ValueError, TypeError or
    IndexError when the item cannot be scored (the caller scores it 0 with the reason)."""
    evaluator = options.get("evaluator", "osworld_g")
    kind, coords, size = expected.get("box_type"), expected.get("box_coordinates"), options.get("image_size")
    if evaluator == "osworld_g":
        return float(bool(osworld_g_hit(osworld_g_prediction(point, refused), kind, coords, size)))
    if evaluator not in EVALUATORS:
        raise ValueError(f"unknown grounding evaluator {evaluator!r} (one of {', '.join(EVALUATORS)})")
    if evaluator == "screenspot_pro" and kind == "refusal":
        return float(screenspot_pro_negative(point, refused))
    if kind != "bbox":
        raise ValueError(f"{evaluator} scores boxes only, got box_type {kind!r}")
    if point is None:
        return 0.0  # "wrong format": no coordinates in the reply
    if size is None:
        raise ValueError(f"{evaluator} compares points as fractions of the image, whose size is unknown")
    hit = seeclick_hit if evaluator == "seeclick" else screenspot_pro_hit
    return float(hit(point, coords, size))

"""VABench answers scored in both scoring modes (benchmarks/base.py): `official` as the authors' evaluation
scripts score them, `toolpath` as a careful grader would.

The official code is Embodied-R1's eval/hf_inference_vabench_point.py and eval/hf_inference_vabench_visual_trace.py
(github pickxiguapi/Embodied-R1, commit e599e95), run as published (reasoning_model=True, visualization on).
What it does, step by step, and what `official` mode therefore does:

  1. The answer is what one `<answer>(.*?)</answer>` holds: case-sensitive, and `.` stops at a newline, so an
     answer block written over several lines is not found and the reply reads as "" (no points). Our
     questions ask for this very form, `<answer><point>[[x1, y1], [x2, y2], ...]</point></answer>`, so the
     reasoning-model setting is the one that reads our agents' answers (on the grid, see step 3).
  2. Points: the first `<point>\\[(.*?)\\]</point>` (on one line; no space allowed after `<point>` or before
     `</point>`); its text, single quotes made double, is read as the JSON list `[text]`; when that is not JSON,
     every `[x, y]` of unsigned decimals in it is taken instead (so `[(1, 2)]` gives nothing).
  3. The points are pixels of the image. Our question asks for the 0-1000 grid, so both modes first take each
     point's numbers to pixels, x * width / 1000 and y * height / 1000, unrounded (`grid_to_pixels`): the
     official code then sees what it would have seen had the agent answered in pixels.
  4. Point records: a point counts when `len(point) == 2` and x1 <= x <= x2 and y1 <= y <= y2 (edges inside);
     every item of the list counts in the total, a 3-number item too. The record's accuracy is inside / total
     (0 with no points), and the published figure pools: all points inside / all points. Known bugs, kept:
       - a reply with no readable points adds nothing to either sum, so it drops out of the figure instead
         of counting as a miss ("the plate" scores nothing and costs nothing);
       - an item the comparison cannot take (a number alone: `<point>[500, 400]</point>`; text; a nested
         list; None) raises inside the per-record try and the whole record is dropped from the results; so
         does a two-item one that is not two numbers, where the chained comparison stopped before reaching
         it (`[-5, "a"]`): the visualization, on as published, draws every two-item point.
     Here: value = the record's accuracy, weight = its total (0 for a dropped or pointless record).
  5. Trace records: ground truth and prediction go from pixels to a grid by x / width * 999 (`(1000 - 1)`),
     unrounded; both are resampled to the longer length by linear interpolation at evenly spaced fractional
     indices; mae = mean of (|dx| + |dy|) / 2, rmse = sqrt(mean of dx² + dy²). A prediction of under two
     points has no rmse; an item that is not two numbers drops the record; so does a first or last waypoint
     that is not finite (the visualization, on as published, turns them into ints). The published figure is
     the mean rmse (and mae) over the records that have one. Here: value = 1 - rmse / 1000, unclamped (so the
     eval's weighted mean is exactly 1 - the published mean rmse / 1000), weight 1; weight 0 and value 0 for
     a record without an rmse. A non-finite rmse (a finite first and last point around an `Infinity` inside)
     would make the published mean NaN; here it is weight 0 too, the one place this mode cannot follow.
  6. A question-answer record without a bbox stops the official run (its KeyError is outside the try); the
     loader here refuses such a record. Polygons and masks are not in the official data: official mode tests
     them with our region tests after the official parsing and counting.

`toolpath` mode reads the reply with our FSD grammar (policies.formats.fsd.parse_fsd): tags in any case and
over several lines, spaces inside the blocks, (x, y) as well as [x, y], a lone `[x, y]`; the first <point>
block of the answer (without <answer> tags: of anything but the <think> block). A block with a value off the
0-1000 grid or an item that is not two numbers is unreadable whole. The conversions are the official ones
(steps 3 and 5), so a reply both modes read scores the same, with these differences:
    no readable points     point record: value 0 with the weight of MISSING_POINTS points (the fewest our
                           question asks for), so silence costs; trace record: value 0, weight 1
    rmse over 1000         the value is clamped at 0 (only a prediction far off the ground truth gets there)
and those of reading listed above (multi-line or capitalised answer tags, no <answer> tags, spaced or
unclosed <point> blocks, parenthesised or lone points, extra brackets, off-grid values, malformed items).

The weight differs by mode where a reply has no points or no rmse; an eval keeps each mode's weight beside its
value (evals/scoring.py), so both figures of a summary are pooled as their own scorer pools them.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from . import Record, Score, check_scoring
from .vabench_metrics import dtw, points_inside, resample_by_index

GRID = 1000                 # the grid our questions ask for
OFFICIAL_SCALE = 1000 - 1   # the official code's pixel → grid factor (x / width * 999)
MISSING_POINTS = 3          # toolpath: a point reply with no readable points counts as this many misses
_ANSWER = re.compile(r"<answer>(.*?)</answer>")          # the official patterns, as published: no re.S, no re.I
_POINT = re.compile(r"<point>\[(.*?)\]</point>")
_PAIR = re.compile(r"\[(\d+\.?\d*),\s*(\d+\.?\d*)\]")


class _Dropped(Exception):
    """The official script's per-record try would have caught an exception: the record leaves the results."""


# ---- the official reading ------------------------------------------------------------------------------

def official_points(reply: Any) -> list:
    """The official parser's list for a reply (steps 1-2): whatever JSON items it holds, unchecked."""
    from ...policies.formats.common import MAX_REPLY_CHARS

    text = reply[:MAX_REPLY_CHARS] if isinstance(reply, str) else ""  # None: an empty reply
    m = _ANSWER.search(text)
    m = _POINT.search(m.group(1).strip()) if m else None
    if not m or not m.group(1).strip():
        return []
    body = "[" + m.group(1).replace("'", '"') + "]"
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        return [[float(x), float(y)] for x, y in _PAIR.findall(body)]
    except (ValueError, RecursionError):  # the official parser's outer `except Exception` leaves no points
        return []


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float))  # bool too: Python compares True as 1, as the official code does


def _scaled(v: Any, size: int) -> Any:
    if not _is_number(v):
        return v
    try:
        return float(v) * size / GRID
    except OverflowError:  # an integer past float range: as far off the image as a float can say
        return math.copysign(math.inf, v)


def grid_to_pixels(points: list, width: int, height: int) -> list:
    """Step 3: each list item's first two numbers from our grid to pixels (x * width / 1000, unrounded);
    anything else left as it is, for the official code to trip on as it would."""
    out = []
    for p in points:
        if isinstance(p, list):
            p = [_scaled(v, (width, height)[i]) if i < 2 else v for i, v in enumerate(p)]
        out.append(p)
    return out


def _official_count(points: list, inside) -> tuple[int, int]:
    """(inside, total) as the official check_points_in_bbox counts them; _Dropped where it raises."""
    hits = 0
    for p in points:
        try:
            if len(p) == 2:
                x, y = p
                hits += bool(inside(x, y))
        except (TypeError, ValueError) as err:
            raise _Dropped(f"the item {p!r} raises {type(err).__name__} in the official count") from None
        if len(p) == 2 and not (_is_number(x) and _is_number(y)):  # the comparison stopped before it
            raise _Dropped(f"the item {p!r} is not two numbers: the official visualization cannot draw it")
    return hits, len(points)


def _official_inside(region):
    if isinstance(region, list) and len(region) == 4 and all(_is_number(v) for v in region):
        return lambda x, y: region[0] <= x <= region[2] and region[1] <= y <= region[3]

    def inside(x, y):  # a polygon or a mask: not in the official data; our test, after the official checks
        if not (_is_number(x) and _is_number(y)):
            raise TypeError("not a number")
        return math.isfinite(x) and math.isfinite(y) and points_inside([(x, y)], region) == 1
    return inside


def _official_grid(points: list, width: int, height: int) -> list[tuple[float, float]]:
    """Step 5's pixel → grid conversion, the same operations in the same order; _Dropped where it raises."""
    out = []
    for p in points:
        try:
            x, y = p
            out.append((x / width * OFFICIAL_SCALE, y / height * OFFICIAL_SCALE))
        except (TypeError, ValueError, OverflowError, ZeroDivisionError) as err:
            raise _Dropped(f"the item {p!r} raises {type(err).__name__} in the official conversion") from None
    return out


# ---- scoring --------------------------------------------------------------------------------------------

def _region(d: dict):
    if "mask" in d:
        from PIL import Image

        with Image.open(d["mask"]) as im:
            return np.asarray(im.convert("L")) > 0
    return d.get("polygon") or d["bbox"]


def _toolpath_points(answer: Any) -> list[list[float]] | None:
    from ...policies.formats.fsd import parse_fsd

    parsed = parse_fsd(answer)
    return parsed.points[0] if parsed.points else None


def _score_points(d: dict, answer: Any, scoring: str) -> Score:
    region = _region(d)
    if scoring == "official":
        pts = grid_to_pixels(official_points(answer), d["width"], d["height"])
        try:
            inside, total = _official_count(pts, _official_inside(region))
        except _Dropped as why:
            return Score(0.0, {"points_in": 0.0, "points": 0.0, "accuracy": 0.0},
                         f"dropped by the official script: {why}", weight=0.0)
        acc = inside / total if total else 0.0
        why = f"{inside} of {total} points inside" if total else "no points read (the official pool skips it)"
        return Score(acc, {"points_in": float(inside), "points": float(total), "accuracy": acc}, why, weight=total)
    pts = _toolpath_points(answer)
    if not pts:
        return Score(0.0, {"points_in": 0.0, "points": 0.0, "accuracy": 0.0},
                     f"no readable <point> block: counted as {MISSING_POINTS} points outside", weight=MISSING_POINTS)
    pixels = [(x * d["width"] / GRID, y * d["height"] / GRID) for x, y in pts]
    inside = points_inside(pixels, region)
    acc = inside / len(pixels)
    return Score(acc, {"points_in": float(inside), "points": float(len(pixels)), "accuracy": acc},
                 f"{inside} of {len(pixels)} points inside", weight=len(pixels))


def _trace_errors(pred: list, gt: list) -> dict[str, float]:
    """The official mae and rmse of two traces on the grid (both resampled to the longer), and our dtw; an
    rmse of inf where the prediction is not finite."""
    n = max(len(pred), len(gt))
    if not np.isfinite(np.asarray(pred, dtype=np.float64)).all():
        return {"rmse": math.inf}
    with np.errstate(over="ignore", invalid="ignore"):  # huge finite values overflow to inf: that rmse is inf
        p, g = resample_by_index(pred, n), resample_by_index(gt, n)
        d = p - g
        out = {"mae": float(np.mean(np.abs(d).sum(axis=1) / 2)), "rmse": float(np.sqrt(np.mean((d ** 2).sum(axis=1))))}
    if math.isfinite(out["rmse"]):
        out["dtw"] = dtw(p, g)
    return out


def _score_trace(d: dict, answer: Any, scoring: str) -> Score:
    w, h = d["width"], d["height"]
    gt = _official_grid(d["trajectory"], w, h)
    if scoring == "official":
        try:
            pred = _official_grid(grid_to_pixels(official_points(answer), w, h), w, h)
        except _Dropped as why:
            return Score(0.0, {"valid": 0.0}, f"dropped by the official script: {why}", weight=0.0)
        ends = [pred[0], pred[-1]] if pred else []
        if any(not math.isfinite(v) for p in ends for v in p):
            return Score(0.0, {"valid": 0.0}, "dropped by the official script: a first or last waypoint that is not "
                                              "finite fails its visualization", weight=0.0)
    else:
        pts = _toolpath_points(answer)
        pred = _official_grid(grid_to_pixels(pts or [], w, h), w, h)
    if len(pred) < 2:
        why = f"{len(pred)} waypoint(s) read: no rmse"
        return Score(0.0, {"valid": 0.0}, why + (" (the official mean skips it)" if scoring == "official" else ""),
                     weight=0.0 if scoring == "official" else 1.0)
    err = _trace_errors(pred, gt)
    if not math.isfinite(err["rmse"]):  # official mode only: toolpath's points are on the grid
        return Score(0.0, {"valid": 0.0}, "the rmse is not finite (it would make the official mean NaN): left out",
                     weight=0.0)
    value = 1.0 - err["rmse"] / 1000
    value = value if scoring == "official" else max(0.0, value)
    return Score(value, {**err, "valid": 1.0}, f"rmse {err['rmse']:.2f}, mae {err['mae']:.2f} on the grid")


def evaluate(record: Record, answer: Any, scoring: str = "toolpath") -> Score:
    """The Score of one answer in `scoring` mode (see the module docstring). Never raises on the answer."""
    check_scoring(scoring)
    d = record.data
    return (_score_points if d["kind"] == "point" else _score_trace)(d, answer, scoring)


def score_case(case: dict, scoring: str) -> float:
    """One case of tests/data/scoring_cases/vabench.json scored through `evaluate`: {"kind": "point" or
    "trace", "width", "height", "bbox" or "trajectory" (pixels), "answer"}."""
    data = {k: case[k] for k in ("kind", "width", "height", "bbox", "polygon", "trajectory") if k in case}
    if "bbox" in data:
        data["bbox"] = [float(v) for v in data["bbox"]]
    if "trajectory" in data:
        data["trajectory"] = [[float(x), float(y)] for x, y in data["trajectory"]]
    return evaluate(Record(id=str(case.get("id", "case")), category=data["kind"], data=data),
                    case.get("answer"), scoring).value

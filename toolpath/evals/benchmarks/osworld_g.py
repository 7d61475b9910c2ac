"""OSWorld-G (Xie et al. 2025, "Scaling Computer-Use Grounding via UI Decomposition and Synthesis"): one
desktop screenshot and one instruction per item; the model answers with a point, or declines.

A data file is OSWorld-G's JSON: a list of records

    {"id": "…", "image_path": "…png", "image_size": [w, h], "instruction": "…",
     "box_type": "bbox" | "polygon" | "refusal", "box_coordinates": [...], "GUI_types": ["…", …]}

bbox is [x, y, w, h] in pixels of the image; polygon a flat [x1, y1, x2, y2, …] list; a refusal item names
an element that is not on the screen (its coordinates are not used). A predicted point inside the box or
polygon (edges included) scores 1; a refusal item scores 1 only when the model declines, and a decline
scores 0 on every other item (grounding_scorers.grounding). `--scoring official` scores as OSWorld-G's own
GroundingEval._eval does, its quirks included (grounding_official says which, and how our answer maps onto
the box it reads); the records keep the image's size for it (from the header when the record has none).

Categories. A record may list several GUI_types. Each sample is tabled under ONE category, its first
GUI_type ("unclassified" when it lists none), so the table's rows add up to the whole set; every type the
record lists is also reported as the metric "type:<T>" (1 or 0 per sample, so its mean over the samples
that list T is the accuracy on T, an item with two types counting in both, as OSWorld-G's own evaluation
counts it). When the data folder holds OSWorld-G's `classification_result.json` ({"classified": {group:
[{"id": …}, …]}}: text_matching, element_recognition, layout_understanding, fine_grained_manipulation,
refusal), those groups are used instead of GUI_types, in the same way: the paper's categories.

Where the data is: `toolpath eval osworld_g --data PATH` or $TOOLPATH_OSWORLD_G (no default; SOURCE says
where to get it): a JSON file, or a folder holding it (OSWorld-G_refined.json,
else OSWorld-G.json, else its only other .json) with the images next to it or in images/. A malformed record
stops the load with a BenchmarkDataError naming the file, the record's index and the field.

Each record runs the computer_use agent in grounding mode (no sandbox: the screenshot is the task's input
image); its answer is JSON {"point": [x, y]} in pixels of the original image, or {"refused": true, ...}.
The default model is the offline OCR grounder (`ocr-grounder`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...spec import TaskSpec
from ..grounding_scorers import grounding_verdict
from . import Benchmark, BenchmarkDataError, Record, Score, data_path, pick, read_json, require, task_id

ENV = "TOOLPATH_OSWORLD_G"
SOURCE = "the OSWorld-G release (xlang-ai, with the Jedi grounding data)"
DEFAULT_MODEL = "ocr-grounder"
BOX_TYPES = ("bbox", "polygon", "refusal")
FILE_NAMES = ("OSWorld-G_refined.json", "OSWorld-G.json")
CLASSIFICATION = "classification_result.json"


# ---- shared by the grounding benchmarks (ScreenSpot, the generated suite) ---------------------------------

def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def numbers(value: Any, n: int | None = None) -> bool:
    """A list of finite numbers (of length n when given)."""
    return isinstance(value, list) and all(_number(v) for v in value) and (n is None or len(value) == n)


def find_image(rel: str, roots: list[Path]) -> Path | None:
    """The first root/rel that is a file (data sets keep images next to the JSON or in a sub-folder)."""
    p = Path(rel)
    if p.is_absolute():
        return p if p.is_file() else None
    for root in roots:
        if (root / p).is_file():
            return (root / p).resolve()
    return None


def image_size(path: Path) -> tuple[int, int] | None:
    """(width, height) from the image's header, or None when PIL cannot read it."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.size
    except (OSError, ValueError, Image.DecompressionBombError):
        return None


def read_json_list(path: Path, what: str) -> list:
    data = read_json(path, f"the {what} file")
    if not isinstance(data, list):
        raise BenchmarkDataError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    if not data:
        raise BenchmarkDataError(f"{path}: no records in the file")
    return data


def grounding_task(bench: str, record: Record, model: str | None, platform: str,
                   options: dict | None = None) -> TaskSpec:
    """The TaskSpec of one grounding item: computer_use in grounding mode on the record's screenshot."""
    d = record.data
    spec = {"id": task_id(record.id), "instruction": d["instruction"], "inputs": {"images": [d["image"]]},
            "agent": {"name": "computer_use", "params": {"mode": "grounding", "platform": platform}},
            "model": model or DEFAULT_MODEL, "limits": {"max_steps": 2},
            "evaluator": {"name": "grounding", "expected": {"box_type": d["box_type"],
                                                            "box_coordinates": d["box_coordinates"]},
                          "options": options or {}},
            "metadata": {"benchmark": bench, "category": record.category, "record_id": record.id,
                         "types": d.get("types", [])}}
    return TaskSpec.model_validate(spec)


def grounding_score(record: Record, answer: str | None, options: dict | None = None) -> Score:
    """The score of the scorer the task's evaluator names (grounding, with the same options), so run and
    eval scores agree; its metrics are the record's "type:<T>" ones, its explanation the scorer's reason."""
    d = record.data
    value, why = grounding_verdict(answer, {"box_type": d["box_type"], "box_coordinates": d["box_coordinates"]},
                                   options or {})
    return Score(value, type_metrics(record, value), why)


def type_metrics(record: Record, value: float) -> dict[str, float]:
    """One "type:<T>" metric per type the record lists, so each type's accuracy is the metric's mean."""
    return {f"type:{t}": value for t in record.data.get("types", [])}


# ---- OSWorld-G's records --------------------------------------------------------------------------------

def _problem(item: Any) -> tuple[str, str] | None:
    """(field, what is wrong) for one record, or None."""
    if not isinstance(item, dict):
        return "record", f"expected a JSON object, got {type(item).__name__}"
    for key in ("id", "image_path", "instruction", "box_type", "box_coordinates"):
        if key not in item:
            return key, "missing"
    if not isinstance(item["id"], (str, int)) or isinstance(item["id"], bool) or str(item["id"]).strip() == "":
        return "id", "expected a non-empty string or an integer"
    if not isinstance(item["image_path"], str) or not item["image_path"].strip():
        return "image_path", "expected a non-empty path"
    if not isinstance(item["instruction"], str) or not item["instruction"].strip():
        return "instruction", "expected a non-empty string"
    size = item.get("image_size")
    if size is not None and not (numbers(size, 2) and size[0] > 0 and size[1] > 0):
        return "image_size", f"expected [width, height] > 0, got {size!r}"
    kind, coords = item["box_type"], item["box_coordinates"]
    if kind not in BOX_TYPES:
        return "box_type", f"expected one of {', '.join(BOX_TYPES)}, got {kind!r}"
    if kind == "bbox" and not (numbers(coords, 4) and coords[2] >= 0 and coords[3] >= 0):
        return "box_coordinates", f"a bbox is [x, y, w, h] with w, h >= 0, got {coords!r}"
    if kind == "polygon" and not (numbers(coords) and len(coords) >= 6 and len(coords) % 2 == 0):
        return "box_coordinates", f"a polygon is a flat [x1, y1, x2, y2, …] list of at least 3 points, got {coords!r}"
    types = item.get("GUI_types", [])
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        return "GUI_types", f"expected a list of strings, got {types!r}"
    return None


def locate(path: Path) -> Path:
    """The records file for a data path: the file itself, or the OSWorld-G JSON in a folder."""
    if path.is_file():
        return path
    for name in FILE_NAMES:
        if (path / name).is_file():
            return path / name
    others = sorted(p for p in path.glob("*.json") if p.name != CLASSIFICATION)
    if len(others) == 1:
        return others[0]
    found = ", ".join(p.name for p in others) or "none"
    raise BenchmarkDataError(f"{path}: expected one OSWorld-G JSON file ({' or '.join(FILE_NAMES)}), found {found}; "
                             f"point --data (or {ENV}) at the file itself")


def read_groups(folder: Path) -> dict[str, list[str]]:
    """id → OSWorld-G's capability groups, from classification_result.json when the folder has it."""
    path = folder / CLASSIFICATION
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        groups: dict[str, list[str]] = {}
        for group, items in data["classified"].items():
            for it in items:
                groups.setdefault(str(it["id"]), []).append(str(group))
        return groups
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise BenchmarkDataError(f"{path}: expected {{\"classified\": {{group: [{{\"id\": …}}, …]}}}}: "
                                 f"{err!r}") from None


def read_records(path: Path) -> list[Record]:
    """Every record of an OSWorld-G file (or folder), checked; BenchmarkDataError naming file, index, field."""
    file = locate(path)
    roots = [file.parent, file.parent / "images"]
    groups = read_groups(file.parent)
    out, seen = [], {}
    for i, item in enumerate(read_json_list(file, "OSWorld-G")):
        problem = _problem(item)
        where = f"{file}: record {i}" + (f" (id {item['id']!r})" if isinstance(item, dict) and "id" in item else "")
        if problem:
            raise BenchmarkDataError(f"{where}: {problem[0]}: {problem[1]}")
        rid = str(item["id"])
        if rid in seen:
            raise BenchmarkDataError(f"{where}: id: repeats record {seen[rid]}")
        seen[rid] = i
        image = find_image(item["image_path"], roots)
        if image is None:
            raise BenchmarkDataError(f"{where}: image_path: image not found: {item['image_path']!r} (looked in "
                                     f"{', '.join(str(r) for r in roots)})")
        size, actual = item.get("image_size"), image_size(image)
        if size is not None:
            if actual and tuple(actual) != (int(size[0]), int(size[1])):
                raise BenchmarkDataError(f"{where}: image_size: {size!r}, but {image.name} is "
                                         f"{actual[0]}x{actual[1]} (its boxes would be read at the wrong scale)")
        types = groups.get(rid) or list(item.get("GUI_types") or [])
        out.append(Record(id=rid, category=types[0] if types else "unclassified", data={
            "instruction": item["instruction"].strip(), "image": str(image),
            "image_size": size or (list(actual) if actual else None),
            "box_type": item["box_type"], "box_coordinates": item["box_coordinates"], "types": types,
            "index": i}))
    return out


class OSWorldG(Benchmark):
    name = "osworld_g"
    description = "OSWorld-G: desktop GUI grounding (a point in the element's box or polygon; refusal items)"
    platform = "desktop"

    def __init__(self, data: Path | None = None):
        self.data = data_path(ENV, data)

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        return pick(read_records(require(self.data, ENV, "OSWorld-G data", SOURCE)), limit, seed)

    def task_options(self, record: Record) -> dict:
        """The grounding evaluator's options: the scoring mode, OSWorld-G's evaluator for the official one, and
        the image's size (OSWorld-G reads clicks in [0, 1] as fractions of it)."""
        return {"scoring": self.scoring, "evaluator": "osworld_g", "image_size": record.data.get("image_size")}

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        return grounding_task(self.name, record, model, self.platform, self.task_options(record))

    def score(self, record: Record, answer: str | None) -> Score:
        return grounding_score(record, answer, self.task_options(record))


def score_case(case: dict, scoring: str) -> float:
    """One case of the scoring table (tests/data/scoring_cases/osworld_g.json) through OSWorldG.score:
    case = {"answer", "box_type", "box_coordinates", "image_size"}."""
    record = Record(id="case", category="case", data={
        "box_type": case.get("box_type"), "box_coordinates": case.get("box_coordinates"),
        "image_size": case.get("image_size"), "types": []})
    return OSWorldG(data=None).scored_as(scoring).score(record, case.get("answer")).value

"""ScreenSpot (SeeClick, Cheng et al. 2024), ScreenSpot-v2 (OS-Atlas, Wu et al. 2024) and ScreenSpot-Pro (Li et
al. 2025): one screenshot and one instruction per item; a predicted point inside the target's box scores 1.

Formats, told apart per file by its first record:
  v1 / v2   one JSON list per platform: screenspot_{mobile,desktop,web}.json (v2: screenspot_*_v2.json),
            records {"img_filename", "bbox": [x, y, w, h], "instruction", "data_type": "text" | "icon",
            "data_source": "ios" | "android" | "macos" | "windows" | a web site …}; images in
            screenspot_imgs/ (v2: screenspotv2_image/) next to the JSON files.
  Pro       annotations/<application>_<os>.json, records {"id", "img_filename", "bbox": [x1, y1, x2, y2],
            "img_size": [w, h], "instruction", "ui_type": "text" | "icon", "group": "Dev" | "Creative" |
            "CAD" | "Scientific" | "Office" | "OS", "application", "platform", …}; images in images/.
            A negative item (its target is not on the screen; declining is the right answer) says
            "gt_type": "negative", as ScreenSpot-Pro's eval script marks one (its other value: "positive"); its
            bbox may be absent or null. Its id is "<file>:<id>:negative", so one file may hold an item both ways.
Categories as the papers table them: v1/v2 platform (mobile, desktop, web: from the file name, else from
data_source) × text/icon, e.g. "mobile/icon"; Pro group × text/icon, e.g. "CAD/text" (negative items too, as
ScreenSpot-Pro's group figures count them). Metrics "type:<T>" give the marginals (each platform or group, text
and icon overall; Pro also each application, and "type:negative" the negative items).

Where the data is: `toolpath eval screenspot --data PATH` or $TOOLPATH_SCREENSPOT (no default;
SOURCE says where to get it): one JSON file, or a folder holding them (in annotations/ for Pro). A malformed
record is a BenchmarkDataError naming the file, the record's index and the field. Each item runs the
computer_use agent in grounding mode, platform phone/web/desktop, like OSWorld-G (see osworld_g.py).

Scoring: toolpath's point-in-box (edges included). `--scoring official` scores v1/v2 as SeeClick's ScreenSpot
test does and Pro as ScreenSpot-Pro's eval_sample_positive_gt does (grounding_official): both compare the point
and box as fractions of the image, so each record keeps the image's size (Pro: its img_size, else the image
header; v1/v2: the header, as SeeClick reads it with PIL).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...spec import TaskSpec
from . import Benchmark, BenchmarkDataError, Record, Score, data_path, pick, require
from .osworld_g import find_image, grounding_score, grounding_task, image_size, numbers, read_json_list

ENV = "TOOLPATH_SCREENSPOT"
SOURCE = "the ScreenSpot, ScreenSpot-v2 or ScreenSpot-Pro release (their annotation JSON and images)"
PLATFORMS = ("mobile", "desktop", "web")
AGENT_PLATFORM = {"mobile": "phone", "desktop": "desktop", "web": "web"}
SOURCE_PLATFORM = {"ios": "mobile", "android": "mobile", "macos": "desktop", "windows": "desktop",
                   "linux": "desktop"}  # any other data_source is a web site
IMAGE_DIRS = ("images", "screenspot_imgs", "screenspotv2_image", "screenspot_v2_imgs")


def _platform_of_file(path: Path) -> str | None:
    for p in PLATFORMS:
        if re.search(rf"(^|[_\-.]){p}([_\-.]|$)", path.stem.lower()):
            return p
    return None


GT_TYPES = ("positive", "negative")  # ScreenSpot-Pro's: is the target on the screen


def is_negative(item: dict) -> bool:
    return item.get("gt_type") == "negative"


def _problem(item: Any, pro: bool) -> tuple[str, str] | None:
    if not isinstance(item, dict):
        return "record", f"expected a JSON object, got {type(item).__name__}"
    if pro and item.get("gt_type", "positive") not in GT_TYPES:
        return "gt_type", f"expected one of {', '.join(GT_TYPES)}, got {item['gt_type']!r}"
    negative = pro and is_negative(item)
    need = ("img_filename", "instruction") + (() if negative else ("bbox",)) + \
        (("ui_type", "group") if pro else ("data_type",))
    for key in need:
        if key not in item:
            return key, "missing" + (" (a ScreenSpot-Pro file: its first record has img_size/ui_type)" if pro else "")
    if not isinstance(item["img_filename"], str) or not item["img_filename"].strip():
        return "img_filename", "expected a non-empty path"
    if not isinstance(item["instruction"], str) or not item["instruction"].strip():
        return "instruction", "expected a non-empty string"
    box = item.get("bbox")
    if negative:
        pass  # nothing on the screen to point at: a box, if any, is not read
    elif pro and not (numbers(box, 4) and box[2] >= box[0] and box[3] >= box[1]):
        return "bbox", f"ScreenSpot-Pro's bbox is [x1, y1, x2, y2] with x2 >= x1, y2 >= y1, got {box!r}"
    if not pro and not (numbers(box, 4) and box[2] >= 0 and box[3] >= 0):
        return "bbox", f"ScreenSpot's bbox is [x, y, w, h] with w, h >= 0, got {box!r}"
    for key in (("ui_type", "group") if pro else ("data_type",)):
        if not isinstance(item[key], str) or not item[key].strip():
            return key, "expected a non-empty string"
    if "img_size" in item and not (numbers(item["img_size"], 2) and min(item["img_size"]) > 0):
        return "img_size", f"expected [width, height] > 0, got {item['img_size']!r}"
    return None


def files_of(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    folder = path / "annotations" if (path / "annotations").is_dir() else path
    found = sorted(folder.glob("*.json"))
    if not found:
        raise BenchmarkDataError(f"{path}: no ScreenSpot JSON files in {folder} (set {ENV} or --data to the "
                                 f"folder or one file)")
    return found


def read_file(file: Path) -> list[Record]:
    items = read_json_list(file, "ScreenSpot")
    pro = isinstance(items[0], dict) and ("ui_type" in items[0] or "img_size" in items[0] or "gt_type" in items[0])
    roots = [file.parent, *(file.parent / d for d in IMAGE_DIRS), file.parent.parent,
             *(file.parent.parent / d for d in IMAGE_DIRS)]
    file_platform = _platform_of_file(file)
    out = []
    for i, item in enumerate(items):
        where = f"{file}: record {i}"
        problem = _problem(item, pro)
        if problem:
            raise BenchmarkDataError(f"{where}: {problem[0]}: {problem[1]}")
        image = find_image(item["img_filename"], roots)
        if image is None:
            raise BenchmarkDataError(f"{where}: img_filename: image not found: {item['img_filename']!r} (looked "
                                     f"in {file.parent} and its {', '.join(IMAGE_DIRS)} folders, and one level up)")
        if pro:
            kind, group = item["ui_type"].strip().lower(), item["group"].strip()
            category, agent_platform = f"{group}/{kind}", "desktop"
            types = [group, kind] + ([f"app:{item['application']}"] if isinstance(item.get("application"), str) else [])
            rid = f"{file.stem}:{item.get('id', i)}"
            if is_negative(item):
                types, rid = types + ["negative"], rid + ":negative"
        else:
            kind = item["data_type"].strip().lower()
            source = str(item.get("data_source", "")).strip().lower()
            platform = file_platform or SOURCE_PLATFORM.get(source, "web")
            category, agent_platform = f"{platform}/{kind}", AGENT_PLATFORM[platform]
            types = [platform, kind]
            rid = f"{file.stem}:{i}"
        size = item.get("img_size") if pro else None
        size = size or image_size(image)
        out.append(Record(id=rid, category=category, data={
            "instruction": item["instruction"].strip(), "image": str(image),
            "box_type": "refusal" if pro and is_negative(item) else "bbox",
            "box_coordinates": None if pro and is_negative(item) else list(item["bbox"]),
            "bbox_format": "xyxy" if pro else "xywh",
            "platform": agent_platform, "types": types, "format": "pro" if pro else "v1/v2", "index": i,
            "image_size": list(size) if size else None,
            "source": item.get("data_source") or item.get("application")}))
    return out


def read_records(path: Path) -> list[Record]:
    out: list[Record] = []
    seen: dict[str, Path] = {}
    for file in files_of(path):
        for r in read_file(file):
            if r.id in seen:
                raise BenchmarkDataError(f"{file}: record {r.data['index']}: id: {r.id!r} repeats one in {seen[r.id]}")
            seen[r.id] = file
            out.append(r)
    return out


class ScreenSpot(Benchmark):
    name = "screenspot"
    description = "ScreenSpot v1/v2 and ScreenSpot-Pro: GUI grounding (a point in the target's box)"

    def __init__(self, data: Path | None = None):
        self.data = data_path(ENV, data)

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        return pick(read_records(require(self.data, ENV, "ScreenSpot data", SOURCE)), limit, seed)

    def task_options(self, record: Record) -> dict:
        """The grounding evaluator's options: the box convention, the scoring mode, the published evaluator
        the official mode reproduces (SeeClick's for v1/v2, ScreenSpot-Pro's for Pro) and the image's size."""
        return {"bbox_format": record.data["bbox_format"], "scoring": self.scoring,
                "evaluator": "screenspot_pro" if record.data.get("format") == "pro" else "seeclick",
                "image_size": record.data.get("image_size")}

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        return grounding_task(self.name, record, model, record.data["platform"], self.task_options(record))

    def score(self, record: Record, answer: str | None) -> Score:
        return grounding_score(record, answer, self.task_options(record))


def score_case(case: dict, scoring: str) -> float:
    """One case of the scoring table (tests/data/scoring_cases/screenspot.json) through ScreenSpot.score:
    case = {"evaluator": "seeclick" (v1/v2, bbox [x, y, w, h]) | "screenspot_pro" (bbox [x1, y1, x2, y2]),
    "answer", "bbox", "img_size"[, "gt_type": "negative"]}."""
    pro = case.get("evaluator") == "screenspot_pro"
    negative = pro and is_negative(case)
    record = Record(id="case", category="case", data={
        "box_type": "refusal" if negative else "bbox", "box_coordinates": None if negative else case.get("bbox"),
        "bbox_format": "xyxy" if pro else "xywh",
        "format": "pro" if pro else "v1/v2", "image_size": case.get("img_size"), "types": []})
    return ScreenSpot(data=None).scored_as(scoring).score(record, case.get("answer")).value

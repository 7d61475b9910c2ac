"""VABench (Yuan et al. 2025, "From Seeing to Doing", arXiv 2505.08548): visual aids for manipulation, scored as
FSD's authors score them: the free-space points inside the target region, the visual trace against the
ground truth's.

Metrics: vabench_metrics.py (point accuracy, trace MAE/RMSE/DTW).

Records. VABench ships as two parquet files (VABench-Point, VABench-VisualTrace: columns id, problem,
answer, images). Neither pandas nor pyarrow is a dependency here, so the loader reads the same rows as JSON
(a list) or JSONL (one object a line), images as files:

    {"id": "fsd_pointbridge_17150",
     "problem": "<image> You are currently a robot … Your task instruction: put carrot on plate. …",
     "answer": "<type>fsd_visual_trace</type>{\"trajectory\": [[158, 59], [164, 64], …]}",
     "image": "images/fsd_pointbridge_17150.jpg"}

    "answer": "<type>fsd_free_point</type>{\"bbox\": [x1, y1, x2, y2], \"free_points\": […]}"

Coordinates in pixels of the image. `answer` may also be that object itself ({"type": …, …}); "answer_raw",
"image_path" and "images": [path] (as the authors' parquet export writes them) and "instruction" (instead of
problem) are read too; a point record may give "mask" (an image path, nonzero = target) instead of a bbox.
Where pandas is installed, converting the parquet is a few lines: for each row of pandas.read_parquet(p),
write row.images[0] (JPEG bytes) to images/<id>.jpg, and the other columns as a JSON line with
"image": "images/<id>.jpg".

Where the data is: `toolpath eval vabench --data PATH` or $TOOLPATH_VABENCH (no default; SOURCE says
where to get it): a .json/.jsonl file, or a folder whose .json/.jsonl files are all read; image paths
are relative to the file's folder (or its images/). A malformed record stops the load with a
BenchmarkDataError naming the file, the line or index, and the field.

Each record asks the react agent (no tools but final_answer) our question of its kind (policies.formats.fsd:
"free_space" for a point record, "trace" for a trace record) about the task the record's problem names, on
the 0-1000 grid. Scoring, in both modes (official and toolpath, and how they differ: vabench_scoring.py):
the answer's points go to pixels unrounded (x * width / 1000); a point record's Score is the fraction of its
points inside the box (or polygon, or mask) with the number of points as its weight, so the eval's score is
the pooled figure VABench publishes (all points inside / all points) and the metric `accuracy` is the
per-record mean; a trace record's ground truth and prediction go from pixels to VABench's grid as its code
does (x / width * 999, no rounding), and its Score is 1 - rmse / 1000, so the eval's score is 1 - the mean
rmse / 1000 (official mode; toolpath counts a reply without a trace as 0). Metrics: point records points_in,
points, accuracy; trace records mae, rmse and dtw (over the answers that have them, as VABench averages them)
and valid. The overall score pools point and trace records by weight; the per-kind rows (by_category) are the
two published figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...spec import TaskSpec
from . import Benchmark, BenchmarkDataError, Record, Score, data_path, pick, read_json_lines, require, task_id
from .osworld_g import find_image, image_size, numbers, read_json_list

ENV = "TOOLPATH_VABENCH"
SOURCE = "the VABench release of FSD (From Seeing to Doing), as JSON/JSONL with its images"
TYPES = {"fsd_free_point": "point", "fsd_visual_trace": "trace"}
QUESTION_OF = {"point": "free_space", "trace": "trace"}
_TYPE_TAG = re.compile(r"^\s*<type>\s*([\w-]+)\s*</type>\s*", re.I)
_TASK = re.compile(r"task instruction:\s*(.+?)(?:\.(?:\s|$)|$)", re.I | re.S)


# ---- records --------------------------------------------------------------------------------------------

def task_of(problem: str) -> str:
    """The task an FSD problem text names ("… Your task instruction: put carrot on plate. …"), else the text."""
    text = problem.replace("<image>", " ").strip()
    m = _TASK.search(text)
    return " ".join((m.group(1) if m else text).split()).rstrip(".")


def _answer(item: dict) -> tuple[str | None, Any, str | None]:
    """(kind, the answer's data, problem) of a record's answer field."""
    raw = item.get("answer", item.get("answer_raw"))
    if isinstance(raw, dict):
        data = dict(raw)
        kind = str(data.pop("type", "")).strip()
        data = data.get("data", data)
    elif isinstance(raw, str):
        m = _TYPE_TAG.match(raw)
        if not m:
            return None, None, "expected \"<type>fsd_free_point|fsd_visual_trace</type>{…}\""
        kind = m.group(1)
        try:
            data = json.loads(raw[m.end():])
        except ValueError as err:
            return None, None, f"the JSON after </type> is not valid: {err}"
    else:
        return None, None, "missing (or not a string/object)"
    if kind not in TYPES:
        return None, None, f"type {kind!r} is not one of {', '.join(TYPES)}"
    return TYPES[kind], data, None


def _image_field(item: dict) -> Any:
    for key in ("image", "image_path"):
        if item.get(key):
            return item[key]
    imgs = item.get("images")
    if isinstance(imgs, list) and imgs and isinstance(imgs[0], str):
        return imgs[0]
    return None


def _check(item: Any, roots: list[Path]) -> tuple[dict | None, tuple[str, str] | None]:
    """The record's data, or (field, what is wrong)."""
    if not isinstance(item, dict):
        return None, ("record", f"expected a JSON object, got {type(item).__name__}")
    rid = item.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or str(rid).strip() == "":
        return None, ("id", "expected a non-empty string or an integer")
    problem = item.get("problem", item.get("instruction"))
    if not isinstance(problem, str) or not problem.replace("<image>", "").strip():
        return None, ("problem", "expected the task text (problem or instruction)")
    kind, ans, err = _answer(item)
    if err:
        return None, ("answer", err)
    rel = _image_field(item)
    if not isinstance(rel, str):
        return None, ("image", "expected an image path (image, image_path or images: [path])")
    image = find_image(rel, roots)
    if image is None:
        return None, ("image", f"image not found: {rel!r} (looked in {', '.join(str(r) for r in roots)})")
    size = image_size(image)
    if size is None:
        return None, ("image", f"{image} is not a readable image")
    w, h = size
    data = {"task": task_of(problem), "problem": problem, "image": str(image), "width": w, "height": h, "kind": kind}
    if kind == "trace":
        traj = ans.get("trajectory") if isinstance(ans, dict) else None
        if not (isinstance(traj, list) and len(traj) >= 2 and all(numbers(p, 2) for p in traj)):
            return None, ("answer", f"a trace answer's trajectory is a list of >= 2 [x, y] points, got {traj!r}")
        data["trajectory"] = [[float(x), float(y)] for x, y in traj]
    else:
        box, mask = (ans.get("bbox"), ans.get("mask")) if isinstance(ans, dict) else (None, None)
        if mask is not None:
            mpath = find_image(str(mask), roots)
            if mpath is None:
                return None, ("answer", f"mask image not found: {mask!r}")
            data["mask"] = str(mpath)
        elif numbers(box, 4) and box[0] <= box[2] and box[1] <= box[3]:
            data["bbox"] = [float(v) for v in box]
        else:
            return None, ("answer", f"a point answer needs bbox [x1, y1, x2, y2] (x1 <= x2, y1 <= y2) or mask, "
                                    f"got {box!r}")
    return data, None


def _rows(file: Path) -> list[tuple[str, Any]]:
    """(where, item) for every record of a .json (a list) or .jsonl file."""
    if file.suffix != ".jsonl":
        return [(f"{file}: record {i}", item) for i, item in enumerate(read_json_list(file, "VABench"))]
    return [(f"{file}:{n}", item) for n, item in read_json_lines(file, "the VABench file")]


def files_of(path: Path) -> list[Path]:
    if path.suffix == ".parquet":
        raise BenchmarkDataError(f"{path}: parquet is not read here (no pandas/pyarrow); convert it to JSONL with "
                                 f"the images as files (see toolpath/evals/benchmarks/vabench.py)")
    if path.is_file():
        return [path]
    found = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl"))
    if not found:
        raise BenchmarkDataError(f"{path}: no .json or .jsonl VABench records in the folder (set {ENV} or --data)")
    return found


def read_records(path: Path) -> list[Record]:
    out, seen = [], {}
    for file in files_of(path):
        roots = [file.parent, file.parent / "images"]
        rows = _rows(file)
        if not rows:
            raise BenchmarkDataError(f"{file}: no records in the file")
        for where, item in rows:
            data, problem = _check(item, roots)
            if problem:
                raise BenchmarkDataError(f"{where}: {problem[0]}: {problem[1]}")
            rid = str(item["id"])
            if rid in seen:
                raise BenchmarkDataError(f"{where}: id {rid!r} repeats {seen[rid]}")
            seen[rid] = where
            out.append(Record(id=rid, category=data["kind"], data=data))
    return out


# ---- scoring --------------------------------------------------------------------------------------------

class VABench(Benchmark):
    name = "vabench"
    description = "VABench (FSD): free-space points in the target region, visual-trace MAE/RMSE/DTW"

    def __init__(self, data: Path | None = None):
        self.data = data_path(ENV, data)

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        return pick(read_records(require(self.data, ENV, "VABench data", SOURCE)), limit, seed)

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        from ...policies.formats.fsd import QUESTIONS

        d = record.data
        text = (f"Task: {d['task']}\nImage: {d['width']}x{d['height']} pixels; coordinates on a 0-1000 grid (x to "
                f"the right, y down).\nQuestion: {QUESTIONS[QUESTION_OF[d['kind']]]}")
        spec = {"id": task_id(record.id), "instruction": text, "inputs": {"images": [d["image"]]},
                "agent": {"name": "react"}, "tools": ["final_answer"], "limits": {"max_steps": 2},
                "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id}}
        if model:
            spec["model"] = model
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: str | None) -> Score:
        from .vabench_scoring import evaluate

        return evaluate(record, answer, self.scoring)

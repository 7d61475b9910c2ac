"""MindCube (Yin et al. 2025): multiple-choice spatial questions about a scene seen from a few views.

A question file is MindCube's JSONL, one object a line:

    {"id": "among_…", "question": "… A. left B. back C. right", "gt_answer": "B",
     "images": ["other_all_image/among/<scene>/front_126.png", …],
     "category": [...], "type": "...", "meta_info": [...]}

`id`, `question`, `gt_answer` (one letter A-E) and `images` (paths relative to the data root) are required;
`category`, `type` and `meta_info` are kept as they are. A bad line stops the load with an error naming the
file and line: a benchmark that silently drops questions changes its own denominator.

The setting (around, among, rotation, translation) comes from the id, and is the category each sample is
tabled under. The overall score leaves translation out, as MindCube reports it.

Scoring modes (benchmarks/base.py). `toolpath` reads the option letter as a grader would
(scorers.mindcube_letter): a reply that opens with "B." or "(B)", else the <Answer> section, else the last
"Answer: X" / "answer is X", else the last lone capital. `official` is MindCube's extract_answer
(evals/official_qa.mindcube_extract), which takes the last "X." anywhere in the reply before anything else,
so "Not C. The answer is B" is read as C there and as B here. tests/data/scoring_cases/mindcube.json holds
the cases.

Where the data is:
  TOOLPATH_MINDCUBE_FILE  the question file; default: the small hand-made sample shipped here
                          (data/mindcube_sample.jsonl, `among` scenes only; see its own note below)
  TOOLPATH_MINDCUBE_DIR   the root the image paths are relative to (or `--data PATH`); no default: get
                          MindCube's images from SOURCE below
  TOOLPATH_MINDCUBE_AGENT the agent that answers (default visual_program)

The shipped sample's questions are about the `among` scenes, where the data itself names each view (front,
left, back, right in the file names): which image faces the object from the opposite side, how far the
viewing direction turns between two views, which two views are opposite. Their answers follow from those
names alone; each record's meta_info lists the view of every image it uses. The `around` and `rotation`
scenes carry no such labels, so no question is written about them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...spec import TaskSpec
from ..scorers import SCORERS, mindcube_letter
from . import Benchmark, BenchmarkDataError, Record, Score, data_path, pick, read_json_lines, require, task_id

FILE_ENV, DIR_ENV, AGENT_ENV = "TOOLPATH_MINDCUBE_FILE", "TOOLPATH_MINDCUBE_DIR", "TOOLPATH_MINDCUBE_AGENT"
SAMPLE_FILE = Path(__file__).parent / "data" / "mindcube_sample.jsonl"
SOURCE = "the MindCube release (Yin et al. 2025, Hugging Face dataset MLL-Lab/MindCube)"
SETTINGS = ("around", "among", "rotation", "translation")
REQUIRED = ("id", "question", "gt_answer", "images")
LETTERS = "ABCDE"

extract_answer = mindcube_letter  # the toolpath mode's reader; MindCube's own is official_qa.mindcube_extract


def setting_of(item_id: str) -> str:
    """around / among / rotation / translation from a question id's prefix, else 'other'.

    An id that does not start with a setting is matched the way MindCube's evaluator matches it (the first
    of around, rotation, translation, among that the id contains), so such ids are tabled as MindCube does.
    """
    low = item_id.lower()
    for s in SETTINGS:
        if low.startswith(s):
            return s
    return next((s for s in ("around", "rotation", "translation", "among") if s in low), "other")


def _problem(item: Any) -> str | None:
    """What is wrong with one parsed line, or None."""
    if not isinstance(item, dict):
        return f"expected a JSON object, got {type(item).__name__}"
    missing = [k for k in REQUIRED if k not in item]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    if not isinstance(item["id"], str) or not item["id"].strip():
        return "id: expected a non-empty string"
    if not isinstance(item["question"], str) or not item["question"].strip():
        return "question: expected a non-empty string"
    if not isinstance(item["gt_answer"], str) or item["gt_answer"].strip().upper() not in tuple(LETTERS):
        return f"gt_answer: expected one letter A-E, got {item['gt_answer']!r}"
    images = item["images"]
    if not isinstance(images, list) or not images or not all(isinstance(p, str) and p.strip() for p in images):
        return "images: expected a non-empty list of paths"
    return None


def read_questions(path: Path, root: Path) -> list[tuple[int, dict]]:
    """(line number, item) for every question in a MindCube JSONL file; blank lines are skipped.

    Raises BenchmarkDataError naming the file and line of the first bad line, a repeated id, or an image
    that is not under `root`."""
    items, first_line = [], {}
    for n, item in read_json_lines(path, "MindCube question file"):
        problem = _problem(item)
        if problem:
            raise BenchmarkDataError(f"{path}:{n}: {problem}")
        if item["id"] in first_line:
            raise BenchmarkDataError(f"{path}:{n}: id {item['id']!r} repeats line {first_line[item['id']]}")
        first_line[item["id"]] = n
        for rel in item["images"]:
            if not (root / rel).is_file():
                raise BenchmarkDataError(f"{path}:{n}: image not found: {root / rel} (image paths are relative "
                                         f"to {root}; set {DIR_ENV} to the folder that holds them)")
        items.append((n, item))
    if not items:
        raise BenchmarkDataError(f"{path}: no questions in the file")
    return items


def to_record(item: dict, root: Path) -> Record:
    setting = setting_of(item["id"])
    return Record(id=item["id"], category=setting, data={
        "question": item["question"], "gt_answer": item["gt_answer"].strip().upper(), "images": item["images"],
        "file_answer": item["gt_answer"],
        "image_paths": [str((root / rel).resolve()) for rel in item["images"]], "setting": setting,
        "category": item.get("category", []), "type": item.get("type", ""), "meta_info": item.get("meta_info", [])})


class MindCube(Benchmark):
    name = "mindcube"
    description = "MindCube: multiple-choice spatial questions over a few views (sample: among scenes)"
    overall_excludes = ("translation",)  # MindCube's overall accuracy leaves translation out

    def __init__(self, agent: str | None = None, question_file: str | Path | None = None,
                 data_dir: str | Path | None = None, data: str | Path | None = None):
        self.agent = agent or os.environ.get(AGENT_ENV, "").strip() or "visual_program"
        self.question_file = data_path(FILE_ENV, question_file, SAMPLE_FILE)
        self.data_dir = data_path(DIR_ENV, data_dir or data)  # `data`: `toolpath eval mindcube --data PATH`

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        path = require(self.question_file, FILE_ENV, "MindCube question file")
        root = require(self.data_dir, DIR_ENV, "MindCube data folder", SOURCE)
        return pick([to_record(item, root) for _, item in read_questions(path, root)], limit, seed)

    def _evaluator(self, record: Record) -> dict:
        return {"name": "mindcube_choice", "expected": record.data["gt_answer"],
                "options": {"scoring": self.scoring,
                            "file_answer": record.data.get("file_answer", record.data["gt_answer"])}}

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        n = len(record.data["image_paths"])
        instruction = (f"{record.data['question']}\n\nThe {n} image(s) are given in order: "
                       + ", ".join(f"image {i}" for i in range(1, n + 1))
                       + ". Choose one option and give its letter (A, B, C, …) as your final answer.")
        spec = {
            "id": task_id(record.id),
            "instruction": instruction,
            "inputs": {"images": record.data["image_paths"]},
            "agent": self.agent,
            "sandbox": {"kind": "process"},
            "evaluator": self._evaluator(record),
            "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id,
                         "setting": record.data["setting"], "type": record.data["type"]},
        }
        if model:
            spec["model"] = model
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: str | None) -> Score:
        ev = self._evaluator(record)  # the same evaluator the task carries, so run and eval scores agree
        return Score(SCORERS[ev["name"]](answer, ev["expected"], ev.get("options", {})))


def score_case(case: dict, scoring: str) -> float:
    """One case of tests/data/scoring_cases/mindcube.json: {"answer", "gt_answer"} scored through the
    benchmark's own evaluator."""
    gt = case["gt_answer"]
    record = Record("case", "among", {"gt_answer": gt.strip().upper(), "file_answer": gt})
    return MindCube().scored_as(scoring).score(record, case["answer"]).value

"""Omni3D-Bench (VADAR, Marsili et al. 2025): 3D questions about one indoor image, answered with a number,
a count, or a short text (yes/no, an option).

The annotation file is VADAR's: {"questions": [{image_filename, question, answer, answer_type, …}]}, with
answer_type int, float or str and images under <root>/images/<image_filename>. A question that lacks a
field, or whose answer does not fit its type, stops the load with an error naming the file and the entry.

Scoring (VADAR's metric): int → exact match of the number, float → MRA (the mean over θ in 0.50, 0.55, …,
0.95 of |pred − gt| / gt < 1 − θ), str → exact match after normalising case and punctuation. The number is
read tolerantly from the reply (its last number, or a number word); a reply without one scores 0.
Categories, and so the table's rows, are the answer types.

Scoring modes (benchmarks/base.py). `toolpath`, as above, is what a careful grader accepts: the answer inside
<ans>/<answer> tags when there are tags, the last number of "approximately 0.623 meters", "3 chairs",
"three", "Yes." and "The answer is yes." (hedged yes/no replies score 0), "ne" for "NE". `official` is the
published scorer, VADAR's by default or VLMEvalKit's (`TOOLPATH_OMNI3D_OFFICIAL=vlmevalkit`): the reply must
be the bare value (int("3.0") fails), str answers are compared as gt == reply.lower(), and each one's bugs are
kept (evals/official_qa.py names them). tests/data/scoring_cases/omni3d_bench*.json hold the cases.

Where the data is:
  TOOLPATH_OMNI3D_DIR    the root holding images/ (or `--data PATH`); no default: get it from SOURCE below
  TOOLPATH_OMNI3D_FILE   the annotation file; default <root>/annotations_sample.json (156 questions)
  TOOLPATH_OMNI3D_AGENT  the agent that answers (default visual_program)
  TOOLPATH_OMNI3D_OFFICIAL  the published scorer `--scoring official` reproduces: vadar (default) or vlmevalkit
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...spec import TaskSpec
from ..official_qa import OMNI3D_SCORERS
from ..scorers import SCORERS
from . import Benchmark, BenchmarkDataError, Record, Score, data_path, pick, read_json, require

FILE_ENV, DIR_ENV, AGENT_ENV = "TOOLPATH_OMNI3D_FILE", "TOOLPATH_OMNI3D_DIR", "TOOLPATH_OMNI3D_AGENT"
OFFICIAL_ENV = "TOOLPATH_OMNI3D_OFFICIAL"
SOURCE = "the VADAR release of Omni3D-Bench (Marsili et al. 2025)"
ANSWER_TYPES = ("int", "float", "str")
# What the instruction asks for, by answer type: only the form, never a hint of the answer itself.
ANSWER_FORMS = {"int": "Answer with a whole number only.",
                "float": "Answer with a single number only, without units.",
                "str": "Answer with a short phrase only: yes or no, one of the options, or the form the "
                       "question asks for."}


def _problem(q: Any) -> str | None:
    """What is wrong with one annotation entry, or None."""
    if not isinstance(q, dict):
        return f"expected an object, got {type(q).__name__}"
    missing = [k for k in ("image_filename", "question", "answer", "answer_type") if k not in q]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    for key in ("image_filename", "question"):
        if not isinstance(q[key], str) or not q[key].strip():
            return f"{key}: expected a non-empty string"
    kind, answer = q["answer_type"], q["answer"]
    if kind not in ANSWER_TYPES:
        return f"answer_type: expected one of {', '.join(ANSWER_TYPES)}, got {kind!r}"
    fits = {"int": isinstance(answer, int) and not isinstance(answer, bool),
            "float": isinstance(answer, (int, float)) and not isinstance(answer, bool),
            "str": isinstance(answer, str) and bool(answer.strip())}[kind]
    return None if fits else f"answer {answer!r} is not a valid {kind}"


def read_questions(path: Path, root: Path) -> list[dict]:
    """The questions of a VADAR annotation file; raises BenchmarkDataError naming the file and entry."""
    data = read_json(path, "Omni3D-Bench annotations")
    questions = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(questions, list) or not questions:
        raise BenchmarkDataError(f"{path}: expected an object with a non-empty list \"questions\"")
    for i, q in enumerate(questions):
        problem = _problem(q)
        if problem:
            raise BenchmarkDataError(f"{path}: questions[{i}]: {problem}")
        image = root / "images" / q["image_filename"]
        if not image.is_file():
            raise BenchmarkDataError(f"{path}: questions[{i}]: image not found: {image} (images are read from "
                                     f"<root>/images; set {DIR_ENV} to the root)")
    return questions


def to_record(i: int, q: dict, root: Path) -> Record:
    # The position in the file is the id, so any annotation file gives unique ids whatever indices it carries.
    return Record(id=f"omni3d-{i:03d}", category=q["answer_type"], data={
        "question": q["question"], "answer": q["answer"], "answer_type": q["answer_type"],
        "image_filename": q["image_filename"], "image_path": str((root / "images" / q["image_filename"]).resolve()),
        "question_index": q.get("question_index")})


class Omni3DBench(Benchmark):
    name = "omni3d_bench"
    description = "Omni3D-Bench (VADAR): 3D questions on one image; int exact, float MRA, str exact"

    def __init__(self, agent: str | None = None, annotations: str | Path | None = None,
                 data_dir: str | Path | None = None, data: str | Path | None = None, official: str | None = None):
        self.agent = agent or os.environ.get(AGENT_ENV, "").strip() or "visual_program"
        self.official = official or os.environ.get(OFFICIAL_ENV, "").strip() or "vadar"
        if self.official not in OMNI3D_SCORERS:
            raise BenchmarkDataError(f"{OFFICIAL_ENV}={self.official!r}: the published Omni3D-Bench scorers are "
                                     f"{', '.join(OMNI3D_SCORERS)}")
        self.data_dir = data_path(DIR_ENV, data_dir or data)  # `data`: `toolpath eval omni3d_bench --data PATH`
        self.annotations = data_path(FILE_ENV, annotations,
                                     self.data_dir / "annotations_sample.json" if self.data_dir else None)

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        root = require(self.data_dir, DIR_ENV, "Omni3D-Bench data folder", SOURCE)
        path = require(self.annotations, FILE_ENV, "Omni3D-Bench annotation file")
        return pick([to_record(i, q, root) for i, q in enumerate(read_questions(path, root))], limit, seed)

    def _evaluator(self, record: Record) -> dict:
        return {"name": "omni3d", "expected": record.data["answer"],
                "options": {"answer_type": record.data["answer_type"], "scoring": self.scoring,
                            "official": self.official}}

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        spec = {
            "id": record.id,
            "instruction": f"{record.data['question']}\n\n{ANSWER_FORMS[record.data['answer_type']]}",
            "inputs": {"images": [record.data["image_path"]]},
            "agent": self.agent,
            "sandbox": {"kind": "process"},
            "evaluator": self._evaluator(record),
            "metadata": {"benchmark": self.name, "category": record.category, "answer_type": record.data["answer_type"],
                         "image_filename": record.data["image_filename"]},
        }
        if model:
            spec["model"] = model
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: str | None) -> Score:
        ev = self._evaluator(record)  # the same evaluator the task carries, so run and eval scores agree
        return Score(SCORERS[ev["name"]](answer, ev["expected"], ev["options"]))


def score_case(case: dict, scoring: str) -> float:
    """One case of tests/data/scoring_cases/omni3d_bench*.json: {"answer", "expected", "answer_type",
    "official": "vadar" | "vlmevalkit"} scored through the benchmark's own evaluator."""
    bench = Omni3DBench(official=case.get("official", "vadar")).scored_as(scoring)
    record = Record("case", case["answer_type"], {"answer": case["expected"], "answer_type": case["answer_type"]})
    return bench.score(record, case["answer"]).value

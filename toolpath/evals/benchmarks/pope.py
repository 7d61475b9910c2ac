"""POPE (Li et al. 2023): polling an image's objects with yes/no questions, to measure object hallucination.

`toolpath eval pope` asks "Is there a {object} in the image?" of one image per task; the react agent with no
tools passes the question and the image to the model, whose reply is the answer. The score of a sample is 1
when its reply reads as its label (pope_scoring: POPE's evaluate.py reading in `official` scoring, a careful
grader's in `toolpath`), so the eval's score is accuracy; its `metrics` are precision, recall, F1 and
yes-ratio pooled over the set (and per split, each split a category), positive = yes.

Data:
  default            a generated set (pope_data, pope_sources), offline: easy-vqa test images and shape scenes
                     drawn here, with POPE's random, popular and adversarial negatives, deterministic by seed
  --data PATH        POPE's COCO files (JSON lines: question_id, image, text, label), a file or a folder of them
                     (one split per file); images in the file's folder or in $TOOLPATH_POPE_IMAGES
  TOOLPATH_POPE_SPLIT  random, popular or adversarial: only that split (default: all three, as categories)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ...spec import TaskSpec
from . import Benchmark, BenchmarkDataError, Record, Score, data_path, pick, task_id
from .pope_data import IMAGES_ENV, SPLITS, generated_records, pope_files, read_pope_file
from .pope_scoring import pope_figures, reading, sample_counts
from .pope_sources import generated_folders

SPLIT_ENV = "TOOLPATH_POPE_SPLIT"
DEFAULT_MODEL = "local:tiny-vlm"


def check_split(split: str | None) -> tuple[str, ...]:
    """The splits an eval runs: all three for None or empty, else the one named."""
    if not split:
        return SPLITS
    if split not in SPLITS:
        raise BenchmarkDataError(f"{SPLIT_ENV}={split!r}: expected one of {', '.join(SPLITS)}")
    return (split,)


class POPE(Benchmark):
    name = "pope"
    description = "POPE: yes/no questions on objects in an image (object hallucination); generated set offline"
    model = DEFAULT_MODEL

    def __init__(self, data: str | Path | None = None, split: str | None = None):
        self.data = Path(data).expanduser() if data else None
        self.splits = check_split(split if split is not None else os.environ.get(SPLIT_ENV, "").strip())

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        if self.data is None:
            try:
                found = generated_records(seed, self.splits)
            except RuntimeError as err:  # easy-vqa missing
                raise BenchmarkDataError(str(err)) from None
        else:
            found = [r for f in pope_files(self.data) for r in read_pope_file(f)]
            found = [r for r in found if r.category in self.splits or r.category not in SPLITS]
        return pick(found, limit, seed)

    def data_folders(self) -> list[Path]:
        """Where its images may be besides its file's folder (evals/data_reach.py): $TOOLPATH_POPE_IMAGES, and
        the generated set's folders when it reads no file."""
        generated = generated_folders() if self.data is None else []
        return [p for p in [data_path(IMAGES_ENV)] if p is not None] + generated

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        spec = {"id": task_id(record.id), "instruction": record.data["question"],
                "inputs": {"images": [record.data["image"]]},
                "agent": {"name": "react"}, "tools": [], "limits": {"max_steps": 2},
                "model": model or self.model, "evaluator": None,
                "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id,
                             "label": record.data["label"], "source": record.data["source"]}}
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: str | None) -> Score:
        label = record.data["label"]
        said = reading(answer, self.scoring)
        why = f"label {label}, read as {said or 'neither yes nor no'}"
        return Score(float(said == label), sample_counts(label, said), why)

    def aggregate(self, metrics: list[dict[str, float]]) -> dict[str, float]:
        return pope_figures(metrics)

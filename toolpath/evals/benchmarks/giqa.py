"""GIQA (Grounding-IQA): image quality tied to places. Two task forms on one image each:

- GIQA-DES: "describe the quality, with a box for each distortion"; scored by box mIoU with Hungarian matching
  and type accuracy (giqa_scoring.py), the sample's value their mean;
- GIQA-VQA: region questions (yes/no, which region is worse, what kind of distortion), scored by the shared
  scorers: `short_answer` for yes/no and `choice` for the letters.

Data: a generated set (giqa_data.py: planted distortions of known type, severity and box, deterministic by
seed) or a GIQA-Bench JSON-lines file (`--data`, format in giqa_data.py). The agent is react with the
`assess_quality` tool; TOOLPATH_GIQA_TOOLS=none runs it without (the model alone looks at the picture).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ...spec import TaskSpec
from ..scorers import choice, short_answer
from . import Benchmark, BenchmarkDataError, Record, Score, pick, require, task_id
from .giqa_data import PHOTOS_ENV, generated_records, read_file
from .giqa_scoring import boxes_in, match, read_regions

TOOLS_ENV = "TOOLPATH_GIQA_TOOLS"
# `--category`: the task forms a run may keep (a GIQA-Bench file's records are des, yes_no or choice)
CATEGORIES = ("des", "yes_no", "worse", "kind", "choice")
DES_PROMPT = ("Assess the quality of the image. Name each distortion (blur, noise, JPEG blocking, over-exposure, "
              "under-exposure, colour cast) and where it is, writing its box as <box>[x0, y0, x1, y1]</box> in "
              "pixels after its name. If there is none, say so.")


class GIQA(Benchmark):
    name = "giqa"
    description = "Grounding-IQA: quality descriptions with boxes and region questions; generated set offline"
    model = "local"

    def __init__(self, data: str | Path | None = None, tools: bool | None = None,
                 categories: Iterable[str] | None = None):
        self.data = Path(data).expanduser() if data else None
        self.tools = tools if tools is not None else os.environ.get(TOOLS_ENV, "").strip().lower() != "none"
        self.categories = tuple(categories) if categories else None
        unknown = set(self.categories or ()) - set(CATEGORIES)
        if unknown:
            raise BenchmarkDataError(f"giqa has no category {', '.join(sorted(unknown))}; "
                                     f"choose from {', '.join(CATEGORIES)}")

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        records = (generated_records(seed) if self.data is None
                   else read_file(require(self.data, PHOTOS_ENV, "GIQA-Bench file")))
        if self.categories:
            records = [r for r in records if r.category in self.categories]
        return pick(records, limit, seed)

    def data_folders(self) -> list[Path]:
        from ...paths import home

        folders = [home() / "benchmarks" / "giqa"]
        return folders + ([self.data.parent] if self.data is not None else [])

    def instruction(self, record: Record) -> str:
        """The task's text: the question, what to call (with the tool) and the form of the answer, said last:
        small local models answered "yes" to every question and copied the tool's description into their
        answer until told both."""
        d = record.data
        if d["task"] == "des":
            call = " Call assess_quality on image_1 and use the description it gives." if self.tools else ""
            return DES_PROMPT + call
        n = len(boxes_in(d["question"]))
        call = ("" if not self.tools else " Call assess_quality on image_1." if n == 0 else
                " Call assess_quality on image_1 once with each region's box and compare what it found in them."
                if n > 1 else " Call assess_quality on image_1 with the region's box and the distortion asked about: "
                "the finding it begins with answers the question." if d["task"] == "yes_no" else
                " Call assess_quality on image_1 with the region's box and read what it found in that box.")
        form = ("Reply with one word: yes or no." if d["task"] == "yes_no" else
                "Reply with the letter of one option only.")
        return f"{d['question']}{call} {form}"

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        d = record.data
        # With the tool the first step must call it: the model cannot see the picture, only the tool can.
        agent = {"name": "react", "params": {"first_call": "assess_quality"}} if self.tools else {"name": "react"}
        spec = {"id": task_id(record.id), "instruction": self.instruction(record), "inputs": {"images": [d["image"]]},
                "agent": agent, "tools": ["assess_quality", "final_answer"] if self.tools else [],
                "limits": {"max_steps": 4 if self.tools else 2}, "model": model or self.model, "evaluator": None,
                "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id}}
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: str | None) -> Score:
        d = record.data
        if d["task"] == "des":
            m = match(read_regions(answer), d["regions"])
            return Score((m["miou"] + m["type_acc"]) / 2, {"miou": m["miou"], "type_acc": m["type_acc"]},
                         f"{m['said']} regions said, {m['true']} true: mIoU {m['miou']:.2f}, "
                         f"type accuracy {m['type_acc']:.2f}")
        scorer = short_answer if d["task"] == "yes_no" else choice
        value = scorer(answer, d["answer"], {})
        return Score(value, {"accuracy": value}, f"expected {d['answer']}")

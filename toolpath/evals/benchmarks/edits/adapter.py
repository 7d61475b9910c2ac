"""`toolpath eval edits`: each task's input PNG under $TOOLPATH_HOME/benchmarks/edits/seed<seed>/, run by the
fast_slow agent, whose JSON answer {"image": path, ...} is scored 1 when every subtask passes."""

from __future__ import annotations

import functools
import io
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ....paths import home
from ....spec import TaskSpec
from .. import Benchmark, Record, Score, pick, task_id
from .checks import SubtaskResult, check
from .generation import make_task
from .scene import N_TASKS, EditTask, input_image

# ---- the benchmark adapter -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _task(seed: int, index: int) -> EditTask:
    return make_task(seed, index)


def _png_bytes(img: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return buf.getvalue()


def _answer_image(answer: Any) -> tuple[np.ndarray | None, str]:
    """The image an answer points at, or None and why not. The answer is untrusted."""
    data = answer
    if isinstance(answer, str):
        text = answer.strip()
        try:
            data = json.loads(text)
        except ValueError:
            m = re.search(r"\{.*\}", text, re.DOTALL)
            try:
                data = json.loads(m.group(0)) if m else None
            except ValueError:
                data = None
    if not isinstance(data, dict):
        return None, f"the answer is not a JSON object with an image path: {str(answer)[:120]!r}"
    path = data.get("image")
    if not isinstance(path, str) or not path.strip():
        return None, "the answer has no \"image\" path"
    try:
        with Image.open(Path(path).expanduser()) as im:
            return np.asarray(im.convert("RGB")), ""
    except (OSError, ValueError, Image.DecompressionBombError) as err:
        return None, f"cannot read the image {path!r}: {err}"


class Edits(Benchmark):
    name = "edits"
    description = "procedurally generated multi-step image edits, checked by a program (FaSTA*'s suite)"
    categories = ("1 step", "2 steps", "3 steps", "4 steps")

    def __init__(self, n: int = N_TASKS, agent: str = "fast_slow"):
        self.n, self.agent = n, agent

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        tasks = [_task(seed, i) for i in range(self.n)]
        return pick([Record(id=t.id, category=t.category, data={
            "seed": seed, "index": t.index, "instruction": t.instruction, "kinds": [s.kind for s in t.subtasks],
            "size": [t.scene.width, t.scene.height]}) for t in tasks], limit, seed)

    def task(self, record: Record) -> EditTask:
        return _task(int(record.data["seed"]), int(record.data["index"]))

    def image_path(self, record: Record) -> Path:
        """The task's input PNG, written once and rewritten only when the render differs (a new version)."""
        t = self.task(record)
        path = home() / "benchmarks" / "edits" / f"seed{t.seed}" / f"{t.id}.png"
        data = _png_bytes(input_image(t))
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return path

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        t = self.task(record)
        spec = {"id": task_id(record.id), "instruction": t.instruction,
                "inputs": {"images": [str(self.image_path(record))]}, "agent": {"name": self.agent},
                "evaluator": None,
                "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id,
                             "seed": t.seed, "index": t.index, "kinds": [s.kind for s in t.subtasks]}}
        if model:
            spec["model"] = model
        return TaskSpec.model_validate(spec)

    def subtask_success(self, record: Record, answer: Any) -> list[SubtaskResult]:
        """Per-subtask results for an answer; an unusable answer fails every subtask, saying why."""
        t = self.task(record)
        img, why = _answer_image(answer)
        if img is not None:
            try:
                return check(t, img)
            except ValueError as err:
                why = str(err)
        return [SubtaskResult(s.id, s.kind, False, why) for s in t.subtasks]

    def score(self, record: Record, answer: Any) -> Score:
        """1 when every subtask is done, with metrics beyond it: the share of subtasks done (checked here), and
        the cost and quality the agent reports in its answer (seconds of tool calls, tool calls, product of step
        qualities), when it reports them. A malformed report is left out, not guessed."""
        results = self.subtask_success(record, answer)
        value = 1.0 if results and all(r.ok for r in results) else 0.0
        failed = "; ".join(f"{r.id}: {r.detail}" for r in results if not r.ok)
        out = {"subtask_success": sum(r.ok for r in results) / len(results) if results else 0.0}
        try:
            data = json.loads(answer) if isinstance(answer, str) else answer
            subs = data.get("subtasks") or []
            out["cost_s"] = float(data["cost_s"])
            out["tool_calls"] = float(data["tool_calls"])
            qualities = [float(s["quality"]) for s in subs if s.get("ok")]
            if qualities:
                out["quality"] = sum(qualities) / len(qualities)
        except (TypeError, ValueError, KeyError, AttributeError):
            pass
        return Score(value, out, f"not done: {failed}" if failed else "every subtask done")

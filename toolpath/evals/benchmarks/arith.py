"""A small built-in benchmark: arithmetic word questions that the `calculator` tool solves exactly.

Records are generated from a seed, so the same `--seed` gives the same questions on every machine.
Categories: add, sub, mul, div, mixed. The scorer is numeric (last number in the answer, 1e-6 relative).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from ...arith_questions import CATEGORIES, question
from ...spec import TaskSpec
from ..scorers import numeric
from . import Benchmark, Record, Score

N_RECORDS = 50  # without --limit; a larger --limit generates more (sweeps of hundreds of episodes)


class Arith(Benchmark):
    name = "arith"
    description = "arithmetic questions the calculator tool solves (built in, generated from a seed)"
    categories = CATEGORIES

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        rng = random.Random(seed)
        n = N_RECORDS if limit is None else limit
        for i in range(n):
            cat = self.categories[i % len(self.categories)]
            q, expr, ans = question(rng, cat)
            yield Record(id=f"arith-{seed}-{i:03d}", category=cat,
                         data={"question": q, "expression": expr, "answer": ans})

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        spec = {
            "id": record.id,
            "instruction": record.data["question"] + " Use the calculator tool, then give the number.",
            "tools": ["calculator", "final_answer"],
            "limits": {"max_steps": 4},
            "evaluator": {"name": "numeric", "expected": record.data["answer"]},
            "metadata": {"benchmark": self.name, "category": record.category, **record.data},
        }
        if model:
            spec["model"] = model
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: str | None) -> Score:
        return Score(numeric(answer, record.data["answer"], {}))

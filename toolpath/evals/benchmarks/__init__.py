"""Benchmark adapters: records → TaskSpecs, plus the benchmark's own scorer.

An adapter module defines a class with `name`, `records(limit, seed)`, `to_task(record)` and
`score(record, answer)`, and is listed in BENCHMARKS.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from ...spec import TaskSpec

BENCHMARKS = {"arith": "toolpath.evals.benchmarks.arith:Arith"}


@dataclass
class Record:
    id: str
    category: str
    data: dict[str, Any] = field(default_factory=dict)


class Benchmark(Protocol):
    name: str
    description: str

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]: ...

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec: ...

    def score(self, record: Record, answer: str | None) -> float: ...


class UnknownBenchmark(ValueError):
    pass


def get_benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise UnknownBenchmark(f"unknown benchmark {name!r}; available: {', '.join(sorted(BENCHMARKS))}")
    mod, _, attr = BENCHMARKS[name].partition(":")
    return getattr(importlib.import_module(mod), attr)()

"""Benchmark adapters: records → TaskSpecs, plus the benchmark's own scorer.

An adapter module defines a subclass of `Benchmark` (base.py says what it must and may define) and is named in
the registry's `benchmark` kind (toolpath/registry.py), or added by a plugin there.

Benchmarks that read a data set (MindCube's images, Omni3D-Bench, OSWorld-G, ScreenSpot, VABench, WebArena) find
it through `toolpath eval NAME --data PATH` or an environment variable, never in a folder outside the package:
without either, `records()` is a BenchmarkDataError naming the variable and where to get the data.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Any

from ... import registry
from .base import SCORING_MODES, Benchmark, Record, Score, as_score, check_scoring

__all__ = ["SCORING_MODES", "Benchmark", "BenchmarkDataError", "Record", "Score", "UnknownBenchmark", "as_score",
           "check_scoring", "data_path", "get_benchmark", "pick", "read_json", "require", "task_id"]

class UnknownBenchmark(ValueError):
    pass


class BenchmarkDataError(ValueError):
    """A benchmark's data is missing or malformed; the message names the file (and line) and the variable
    that points at it. The CLI prints it and exits 2."""


def data_path(env: str, given: str | Path | None = None, default: Path | None = None) -> Path | None:
    """The user's copy of a data set: `given` (`--data`, a constructor argument), else `$env`, else `default`
    (only ever a file shipped in the package), else None."""
    if given:
        return Path(given).expanduser()
    value = os.environ.get(env, "").strip()
    return Path(value).expanduser() if value else default


def require(path: Path | None, env: str, what: str, source: str = "") -> Path:
    """`path` if it exists, else a BenchmarkDataError that says what was expected, how to point at it and, when
    none was given, where to get it."""
    if path is None:
        where = f"; get it from {source}" if source else ""
        raise BenchmarkDataError(f"{what}: none given (set {env} to point at it, or pass --data PATH{where})")
    if not path.exists():
        raise BenchmarkDataError(f"{what} not found: {path} (set {env} to point at it)")
    return path


def read_json(path: Path, what: str) -> Any:
    """A benchmark's JSON file, or a BenchmarkDataError naming `what` it is, the file and where it breaks."""
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise BenchmarkDataError(f"cannot read {what} {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise BenchmarkDataError(f"{path}: not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None


def read_json_lines(path: Path, what: str, hint: str = "") -> list[tuple[int, Any]]:
    """(line number, value) for each non-blank line of a JSON-lines file; a BenchmarkDataError naming `what` it
    is on an unreadable file, and the file, line and column of the first line that is not JSON (`hint` is added:
    what the format expects)."""
    import json

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise BenchmarkDataError(f"cannot read {what} {path}: {err}") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as err:
            raise BenchmarkDataError(f"{path}:{n}: not valid JSON: {err.msg} at column {err.colno}"
                                     + (f" ({hint})" if hint else "")) from None
    return out


def task_id(record_id: str) -> str:
    """A TaskSpec id for a record id: characters a spec id cannot hold become '-', at most 128 of them."""
    out = re.sub(r"[^A-Za-z0-9_.\-]", "-", record_id).lstrip("_.-")[:128]
    return out or "record"


def pick(records: list[Record], limit: int | None, seed: int) -> list[Record]:
    """The records an eval runs: all of them, or `limit` taken round-robin across categories, so a quick
    `--limit 3` still shows every setting or answer type. Seed 0 keeps file order (within a category);
    another seed shuffles first, so it picks a different, reproducible subset."""
    order = list(records)
    if seed:
        random.Random(seed).shuffle(order)
    if limit is None or limit >= len(order):
        return order
    queues: dict[str, list[Record]] = {}
    for r in order:
        queues.setdefault(r.category, []).append(r)
    out: list[Record] = []
    while len(out) < limit:
        for q in queues.values():
            if q and len(out) < limit:
                out.append(q.pop(0))
    return out


def get_benchmark(name: str, data: str | Path | None = None, categories: list[str] | None = None) -> Benchmark:
    """The benchmark's adapter; `data` (`toolpath eval BENCH --data PATH`) is the user's copy of its data, for
    the benchmarks that read one (they take `data=` in their constructor); `categories` (`--category`) the
    subsets to run, for the benchmarks that take `categories=` (BFCL)."""
    if name not in registry.declared("benchmark"):
        raise UnknownBenchmark(f"unknown benchmark {name!r}; available: {', '.join(registry.names('benchmark'))}")
    cls = registry.load("benchmark", name)
    kwargs: dict = {}
    if data is not None:
        kwargs["data"] = Path(data).expanduser()
    if categories:
        kwargs["categories"] = list(categories)
    if not kwargs:
        return cls()
    import inspect

    accepted = inspect.signature(cls).parameters
    if "data" in kwargs and "data" not in accepted:
        raise BenchmarkDataError(f"benchmark {name!r} reads no data files: --data does not apply to it")
    if "categories" in kwargs and "categories" not in accepted:
        raise BenchmarkDataError(f"benchmark {name!r} has no categories to choose: --category does not apply to it")
    return cls(**kwargs)

"""BFCL's data as the pinned `bfcl-eval` package ships it: its categories, each item's question, functions and
possible answers, and the package's version (stored with every score).

The files are read straight from the installed package (data/BFCL_v4_<category>.json, one JSON object a line,
and data/possible_answer/ beside them), never through `bfcl_eval.utils`: importing that module creates result
folders beside the package.
"""

from __future__ import annotations

import importlib.util
import json
from functools import lru_cache
from pathlib import Path

from . import BenchmarkDataError

PACKAGE = "bfcl-eval"
INSTALL = "pip install --no-deps bfcl-eval==2026.3.23 (`make setup` does it)"

# The categories whose answer is one response's function calls, scored by the package's AST checker
# (`relevance`: any call is right; `irrelevance`: none is).
AST_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
                  "live_parallel", "live_parallel_multiple")
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")
CATEGORIES = AST_CATEGORIES + RELEVANCE_CATEGORIES
# What the package's function-calling handlers append to every function's description for Python categories
# (bfcl_eval.utils._get_language_specific_hint), so a model sees the functions as the package shows them.
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."


def package_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BenchmarkDataError(f"BFCL's data comes from the {PACKAGE} package, which is not installed: {INSTALL}")
    return Path(next(iter(spec.submodule_search_locations)))


@lru_cache(maxsize=1)
def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(PACKAGE)
    except PackageNotFoundError:
        raise BenchmarkDataError(f"the {PACKAGE} package is not installed: {INSTALL}") from None


def check_category(category: str) -> str:
    if category not in CATEGORIES:
        raise BenchmarkDataError(f"BFCL category {category!r} is not one toolpath runs; categories: "
                                 f"{', '.join(CATEGORIES)} (multi_turn_*, memory, web_search and the Java and "
                                 "JavaScript ones are not run)")
    return category


def _lines(path: Path) -> list[dict]:
    if not path.is_file():
        raise BenchmarkDataError(f"BFCL data file not found: {path} (reinstall {INSTALL})")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise BenchmarkDataError(f"{path}:{n}: not valid JSON: {err.msg}") from None
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise BenchmarkDataError(f"{path}:{n}: expected an object with an id")
        out.append(row)
    return out


@lru_cache(maxsize=None)
def load(category: str) -> tuple[dict, ...]:
    """The category's items in file order, each {id, question, function, ground_truth (AST categories)}."""
    check_category(category)
    data = package_dir() / "data"
    items = _lines(data / f"BFCL_v4_{category}.json")
    if category in AST_CATEGORIES:
        answers = _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")
        if len(answers) != len(items):  # the package pairs them by position, so do we
            raise BenchmarkDataError(f"BFCL {category}: {len(items)} items but {len(answers)} possible answers")
        for item, answer in zip(items, answers):
            item["ground_truth"] = answer.get("ground_truth")
    for item in items:
        for fn in item.get("function") or []:
            fn["description"] = str(fn.get("description", "")) + PYTHON_HINT
    return tuple(items)

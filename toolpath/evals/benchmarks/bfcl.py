"""BFCL (the Berkeley Function Calling Leaderboard) over the data the pinned `bfcl-eval` package ships.

Categories: $TOOLPATH_BFCL_CATEGORIES (comma-separated) or `categories=`, else every one toolpath runs
(bfcl_data.CATEGORIES: simple_python, multiple, parallel, parallel_multiple, irrelevance and the live_*
ones). Each item's functions become the episode's tools (bfcl_tools: they record, never run); the react agent
answers the question, and its response's calls are the answer.

Scoring, both modes per sample, each with the metric "scorer:bfcl-eval <version>":
    official   the package's AST checker on the recorded calls, as its own evaluation runs it (bfcl_official);
               irrelevance: right when no call is made; live_relevance: right when one is
    toolpath   what a careful grader accepts besides: 5.0 for an integer 5, a function called by its dotted
               name, and an optional argument given at its documented default even where the possible answer
               lists only its omission or other values (see `lenient`)
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from ...spec import TaskSpec
from . import Benchmark, BenchmarkDataError, Record, Score, pick, task_id
from . import bfcl_data as data
from .bfcl_official import check
from .bfcl_tools import read_answer, register, tool_name

CATEGORIES_ENV = "TOOLPATH_BFCL_CATEGORIES"


def categories_from(given: Iterable[str] | str | None) -> tuple[str, ...]:
    value = given if given is not None else os.environ.get(CATEGORIES_ENV, "")
    names = [c.strip() for c in (value.split(",") if isinstance(value, str) else value) if c.strip()]
    return tuple(data.check_category(c) for c in names) or data.CATEGORIES


def _instruction(question: Any) -> str:
    """The item's first turn: its system and user messages, in order, as one instruction."""
    turn = question[0] if isinstance(question, list) and question else []
    parts = [str(m.get("content", "")).strip() for m in turn if isinstance(m, dict)]
    text = "\n\n".join(p for p in parts if p)
    if not text:
        raise BenchmarkDataError("a BFCL item has no question text")
    return text


def lenient(calls: list[dict], functions: list[dict], ground_truth: Any) -> list[dict]:
    """The calls as a careful grader reads them: a function named as BFCL writes it (math.factorial) is the one
    the model was shown (math_factorial); an integral float for an integer parameter is that integer; an
    optional argument (not required) equal to the function's documented default is as good as leaving it out."""
    by_name = {tool_name(f["name"]): f for f in functions if isinstance(f, dict) and "name" in f}
    out = []
    for call in calls:
        name = tool_name(str(call.get("name", "")))
        args = call.get("arguments")
        fn = by_name.get(name)
        if fn is None or not isinstance(args, dict):
            out.append({**call, "name": name})
            continue
        params = (fn.get("parameters") or {})
        props, required = params.get("properties") or {}, set(params.get("required") or [])
        fixed = {}
        for key, value in args.items():
            prop = props.get(key) or {}
            if prop.get("type") == "integer" and isinstance(value, float) and value.is_integer():
                value = int(value)
            if key not in required and "default" in prop and value == prop["default"] and \
                    type(value) is type(prop["default"]) and _omission_allowed(ground_truth, fn["name"], key):
                continue
            fixed[key] = value
        out.append({"name": name, "arguments": fixed})
    return out


def _omission_allowed(ground_truth: Any, function: str, param: str) -> bool:
    """Whether every possible answer for `function` lets `param` be left out (lists "" or does not name it)."""
    entries = [e[function] for e in ground_truth or [] if isinstance(e, dict) and isinstance(e.get(function), dict)]
    return all(param not in e or "" in e[param] for e in entries)


def score_calls(category: str, functions: list[dict], ground_truth: Any, calls: list[dict] | None,
                mode: str) -> tuple[bool, str]:
    if mode == "toolpath" and calls is not None:
        calls = lenient(calls, functions, ground_truth)
    return check(category, functions, ground_truth, calls)


def score_case(case: dict, mode: str) -> float:
    """A case of tests/data/scoring_cases/bfcl.json: an item's functions and possible answer, and a response."""
    item = case["item"]
    return float(score_calls(item["category"], item["function"], item.get("ground_truth"), case["calls"], mode)[0])


class BFCL(Benchmark):
    name = "bfcl"
    description = "Berkeley Function Calling Leaderboard (AST and relevance categories of the bfcl-eval package)"

    def __init__(self, categories: Iterable[str] | str | None = None):
        self.categories = categories_from(categories)

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        out = [Record(item["id"], category, {"question": item["question"], "function": item["function"],
                                             "ground_truth": item.get("ground_truth")})
               for category in self.categories for item in data.load(category)]
        return pick(out, limit, seed)

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        names = register(record.data["function"])
        spec = {
            "id": task_id(record.id),
            "instruction": _instruction(record.data["question"]),
            "tools": [*names, "final_answer"],
            # one response is the answer; a step more for a model that first answers malformed and is told so
            "limits": {"max_steps": 3},
            "metadata": {"benchmark": self.name, "category": record.category, "bfcl_id": record.id,
                         "bfcl_eval": data.version()},
        }
        if model:
            spec["model"] = model
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: Any) -> Score:
        calls = read_answer(answer)
        right, why = score_calls(record.category, record.data["function"], record.data.get("ground_truth"),
                                 calls, self.scoring)
        metrics = {f"scorer:bfcl-eval {data.version()}": 1.0, "calls": float(len(calls or []))}
        return Score(float(right), metrics, explanation=why)

"""BFCL (the Berkeley Function Calling Leaderboard) over the data the pinned `bfcl-eval` package ships.

Categories: $TOOLPATH_BFCL_CATEGORIES (comma-separated) or `categories=`, else every one toolpath runs
(bfcl_data.CATEGORIES: simple_python, multiple, parallel, parallel_multiple, irrelevance, the live_* ones and
multi_turn_base, _miss_param and _long_context). In a single-turn item, the functions become the episode's
tools (bfcl_tools: they record, never run); the react agent answers the question, and its response's calls are
the answer. A multi-turn item is one episode: its first turn is the instruction and its later turns the
task's follow-ups (agents/user_turns.py); its functions run on the package's backends (bfcl_multi_turn), and
the answer is every turn's calls, step by step.

Scoring, both modes per sample, each with the metric "scorer:bfcl-eval <version>":
    official   the package's AST checker on the recorded calls, as its own evaluation runs it (bfcl_official);
               irrelevance: right when no call is made; live_relevance: right when one is; multi-turn: the
               package's multi_turn_checker on every turn's calls (bfcl_multi_turn_official)
    toolpath   what a careful grader accepts besides: 5.0 for an integer 5, a function called by its dotted
               name, and an optional argument given at its documented default even where the possible answer
               lists only its omission or other values (see `lenient`); multi-turn: as official (the
               checker compares the backends' states and results, which a grader would too)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ...agents.user_turns import read_conversation
from ...spec import TaskSpec
from . import Benchmark, BenchmarkDataError, Record, Score, pick, task_id
from . import bfcl_data as data
from . import bfcl_multi_turn_official as multi_turn
from .bfcl_multi_turn import ExecutingTool, instances
from .bfcl_official import check
from .bfcl_tools import read_answer, register, tool_name

CATEGORIES_ENV = "TOOLPATH_BFCL_CATEGORIES"


def categories_from(given: Iterable[str] | str | None) -> tuple[str, ...]:
    value = given if given is not None else os.environ.get(CATEGORIES_ENV, "")
    names = [c.strip() for c in (value.split(",") if isinstance(value, str) else value) if c.strip()]
    return tuple(data.check_category(c) for c in names) or data.CATEGORIES


def _turn_text(turn: Any) -> str:
    """A turn's system and user messages, in order, as one message."""
    parts = [str(m.get("content", "")).strip() for m in turn or [] if isinstance(m, dict)]
    return "\n\n".join(p for p in parts if p)


def _instruction(question: Any) -> str:
    """The item's first turn, as one instruction."""
    text = _turn_text(question[0] if isinstance(question, list) and question else [])
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
    """A case of tests/data/scoring_cases/bfcl.json: an item's functions and possible answer, and a response
    (a multi-turn item's: the conversation's turns)."""
    item = case["item"]
    if item["category"] in data.MULTI_TURN_CATEGORIES:
        return float(multi_turn.check(item, case["turns"])[0])
    return float(score_calls(item["category"], item["function"], item.get("ground_truth"), case["calls"], mode)[0])


class BFCL(Benchmark):
    name = "bfcl"
    description = "Berkeley Function Calling Leaderboard (AST, relevance and multi-turn categories of bfcl-eval)"

    def __init__(self, categories: Iterable[str] | str | None = None):
        self.categories = categories_from(categories)

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        keys = ("question", "function", "ground_truth", "involved_classes", "initial_config")
        out = [Record(item["id"], category, {k: item[k] for k in keys if k in item})
               for category in self.categories for item in data.load(category)]
        return pick(out, limit, seed)

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        spec = {
            "id": task_id(record.id),
            "instruction": _instruction(record.data["question"]),
            "metadata": {"benchmark": self.name, "category": record.category, "bfcl_id": record.id,
                         "bfcl_eval": data.version()},
        }
        if record.category in data.MULTI_TURN_CATEGORIES:
            spec.update(self._conversation(record))
        else:
            spec["tools"] = [*register(record.data["function"]), "final_answer"]
            # one response is the answer; a step more for a model that first answers malformed and is told so
            spec["limits"] = {"max_steps": 3}
        if model:
            spec["model"] = model
        return TaskSpec.model_validate(spec)

    @staticmethod
    def _conversation(record: Record) -> dict:
        """A multi-turn item's tools (its backends' methods, run on the episode's instances), its later turns as
        follow-ups, and the package's limit of steps in each turn for the whole conversation."""
        from bfcl_eval.constants.default_prompts import MAXIMUM_STEP_LIMIT

        item = {"id": record.id, **record.data}
        instances(item)  # a starting state the backends refuse fails here, naming the item, before any episode
        turns = record.data["question"]
        return {"tools": register(record.data["function"], ExecutingTool, item=item),
                "followups": [_turn_text(t) for t in turns[1:]],
                # the model's calls and the reply that ends each turn; identical calls in a row are the
                # package's business (it has no such guard), so the step limit is the only one
                "limits": {"max_steps": len(turns) * (MAXIMUM_STEP_LIMIT + 1),
                           "loop_repeats": MAXIMUM_STEP_LIMIT + 1}}

    def score(self, record: Record, answer: Any) -> Score:
        if record.category in data.MULTI_TURN_CATEGORIES:
            turns = read_conversation(answer)
            right, why = multi_turn.check({"id": record.id, **record.data}, turns)
            return Score(float(right), {f"scorer:bfcl-eval {data.version()}": 1.0,
                                        "calls": float(multi_turn.conversation_calls(turns))}, explanation=why)
        calls = read_answer(answer)
        right, why = score_calls(record.category, record.data["function"], record.data.get("ground_truth"),
                                 calls, self.scoring)
        metrics = {f"scorer:bfcl-eval {data.version()}": 1.0, "calls": float(len(calls or []))}
        return Score(float(right), metrics, explanation=why)

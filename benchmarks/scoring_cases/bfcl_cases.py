"""Cases for tests/data/scoring_cases/bfcl.json, their official column made by the bfcl-eval package's own runner.

    PYTHONPATH=. .venv/bin/python benchmarks/scoring_cases/bfcl_cases.py --out tests/data/scoring_cases/bfcl.json

For each category toolpath runs, the first --per items of the installed package's data each get realistic and
adversarial responses (the possible answer itself, its values as other types, a value wrong, a required argument
missing, an unknown one, an optional one at its default, a call too many or too few, the dotted name, no call,
calls as text). Each response is given to the package's evaluation exactly as a function-calling model's result
reaches it ([{name: arguments as JSON text}], the OpenAI FC handler's decode_ast, then
eval_runner._evaluate_single_ast_entry or _evaluate_single_relevance_entry); that verdict is the official
column. A multi-turn item gets whole conversations instead (its possible answer in one step a turn or one call
a step, calls reversed, repeated or added, a turn missing or without a call, turns swapped, every call in the
first turn, an argument changed, missing or as text, an unknown function), given to
eval_runner._evaluate_single_multi_turn_entry as the FC handler's result (each step's calls, then the reply).
toolpath's two modes score the same response (bfcl.score_case), and the script prints official mode's agreement
on every generated case before writing the table.

The runner module imports every provider SDK and tree-sitter, which toolpath never installs: those imports get
empty stand-in modules here (nothing of them runs when a function-calling handler decodes a result). Results
and lock files the package writes go to a temporary BFCL_PROJECT_ROOT.
"""

from __future__ import annotations

import argparse
import copy
import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile
import types
from pathlib import Path

# bfcl-eval's own dependencies (its Requires-Dist, as modules) that a runner import may reach
_PACKAGE_DEPENDENCIES = {"anthropic", "bs4", "boto3", "botocore", "cohere", "datamodel_code_generator", "faiss",
                         "google", "serpapi", "html2text", "mistralai", "overrides", "pandas", "dotenv",
                         "qwen_agent", "rank_bm25", "sentence_transformers", "tabulate", "tenacity", "tqdm",
                         "tree_sitter", "tree_sitter_java", "tree_sitter_javascript", "typer", "writerai",
                         "openai", "huggingface_hub", "networkx", "mpmath", "requests"}


def _placeholder(attr: str):
    """A stand-in module's attribute: a class whose instances accept any call (tree-sitter's parser setup)."""
    if attr.startswith("__"):
        raise AttributeError(attr)
    return _Anything(attr, (), {"__init__": lambda self, *a, **k: None,
                                "__getattr__": lambda self, name: (lambda *a, **k: None)})


class _Anything(type):
    """Placeholder classes whose class attributes are placeholders too (cohere.types.ToolV2 in an annotation)."""

    def __getattr__(cls, attr):
        return _placeholder(attr)

    def __getitem__(cls, item):
        return cls


class _StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any module that cannot be imported becomes an empty one whose attributes are placeholder classes."""

    def find_spec(self, name, path=None, target=None):
        for finder in sys.meta_path:
            if finder is self:
                continue
            try:
                if finder.find_spec(name, path, target) is not None:
                    return None
            except Exception:  # noqa: BLE001
                continue
        if name.split(".")[0] not in _PACKAGE_DEPENDENCIES:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        mod = types.ModuleType(spec.name)
        mod.__path__ = []
        mod.__getattr__ = _placeholder
        return mod

    def exec_module(self, module):
        pass


def package_runner():
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl-root-"))
    os.environ.setdefault("OPENAI_API_KEY", "unused")  # the handler builds a client; no request is ever made
    sys.meta_path.append(_StandIn())
    from bfcl_eval.eval_checker import eval_runner

    return eval_runner, eval_runner.get_handler("gpt-4o-2024-11-20-FC")


def official(runner, handler, item: dict, calls: list | None) -> float:
    from bfcl_eval.constants.enums import Language, ReturnFormat

    # A function-calling model's result: one {name: arguments as JSON} per call; a plain text answer otherwise.
    result = [{c["name"]: json.dumps(c["arguments"])} for c in calls] if calls is not None else \
        "I cannot help with that using the functions given."
    prompt = {"id": item["id"], "question": item["question"], "function": copy.deepcopy(item["function"])}
    if item["category"] in ("irrelevance", "live_irrelevance", "live_relevance"):
        out = runner._evaluate_single_relevance_entry(handler, item["id"], result, prompt, handler.registry_name,
                                                      item["category"])
    else:
        out = runner._evaluate_single_ast_entry(handler, item["id"], result, item["ground_truth"], prompt,
                                                handler.registry_name, item["category"], Language.PYTHON,
                                                ReturnFormat.PYTHON)
    return float(out["valid"])


def official_multi_turn(runner, handler, item: dict, turns: list[dict]) -> float:
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    # A function-calling model's result: per turn, each step's [{name: arguments as JSON}], then its reply.
    result = [[[{c["name"]: json.dumps(c["arguments"])} for c in step] for step in t["steps"]] + [t["reply"]]
              for t in turns]
    prompt = {k: copy.deepcopy(item[k]) for k in ("id", "initial_config", "involved_classes")}
    # the checker keeps instances in globals by model name: a name per case, dropped after it
    model_name = f"case_{len(vars(multi_turn_utils))}_{id(turns)}"
    try:
        out = runner._evaluate_single_multi_turn_entry(handler, item["id"], result, item["ground_truth"], prompt,
                                                       model_name, item["category"])
    finally:
        for key in [k for k in vars(multi_turn_utils) if k.startswith(model_name)]:
            delattr(multi_turn_utils, key)
    return float(out["valid"])


def _ground_truth_turns(item: dict) -> list[list[dict]]:
    """The possible answer's calls, turn by turn, as {name, arguments} (positional arguments named)."""
    import ast
    import inspect

    from toolpath.evals.benchmarks.bfcl_multi_turn import instances, methods

    table = methods(instances(item))
    out = []
    for turn in item["ground_truth"]:
        calls = []
        for text in turn:
            node = ast.parse(text, mode="eval").body
            params = list(inspect.signature(table[node.func.id]).parameters)
            args = {params[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
            args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
            calls.append({"name": node.func.id, "arguments": args})
        out.append(calls)
    return out


def conversations(item: dict) -> list[tuple[str, list[dict]]]:
    truth = _ground_truth_turns(item)

    def turns(steps_per_turn):
        return [{"steps": steps, "reply": "Done."} for steps in steps_per_turn]

    first = next(i for i, t in enumerate(truth) if t)
    call = truth[first][0]
    out = [("the possible answer, one step a turn", turns([[t] if t else [] for t in truth])),
           ("one call a step", turns([[[c] for c in t] for t in truth])),
           ("calls reversed in each turn", turns([[t[::-1]] if t else [] for t in truth])),
           ("a turn's first call twice", turns([[t + t[:1]] if i == first else [t] if t else []
                                                for i, t in enumerate(truth)])),
           ("the last call again at the end", turns([[t] if t else [] for t in truth[:-1]] +
                                                    [[truth[-1] + [c for t in truth for c in t][-1:]]])),
           ("the last turn missing", turns([[t] if t else [] for t in truth[:-1]])),
           ("a turn without a call", turns([[] if i == first else [t] if t else [] for i, t in enumerate(truth)])),
           ("every call in the first turn", turns([[[c for t in truth for c in t]]] + [[] for _ in truth[1:]])),
           ("an unknown function", turns([[[{**call, "name": "not_" + call["name"]}] + truth[first][1:]]
                                          if i == first else [t] if t else [] for i, t in enumerate(truth)]))]
    if len(truth) > 1:
        out.append(("the first two turns swapped", turns([[t] if t else [] for t in [truth[1], truth[0], *truth[2:]]])))

    def with_args(args, what):
        changed = [{**call, "arguments": args}] + truth[first][1:]
        out.append((what, turns([[changed] if i == first else [t] if t else [] for i, t in enumerate(truth)])))

    for key, value in call["arguments"].items():
        if isinstance(value, bool):
            with_args({**call["arguments"], key: not value}, f"{key}: the other boolean")
        elif isinstance(value, (int, float)):
            with_args({**call["arguments"], key: value + 1}, f"{key}: off by one")
            with_args({**call["arguments"], key: str(value)}, f"{key}: as text")
        elif isinstance(value, str):
            with_args({**call["arguments"], key: value + "_x"}, f"{key}: another name")
        with_args({k: v for k, v in call["arguments"].items() if k != key}, f"{key} missing")
    return out


def _first(values: list):
    return next((v for v in values if v != ""), None)


def responses(item: dict) -> list[tuple[str, list | None]]:
    from toolpath.evals.benchmarks.bfcl_tools import tool_name

    fns = {f["name"]: f for f in item["function"]}
    if not item.get("ground_truth"):  # relevance categories: any call of the first function, or none
        out = [("no call", None), ("empty call list", [])]
        for f in item["function"][:1]:
            req = (f.get("parameters") or {}).get("required") or []
            out.append(("a call", [{"name": tool_name(f["name"]), "arguments": {p: "x" for p in req}}]))
            out.append(("a call with no arguments", [{"name": tool_name(f["name"]), "arguments": {}}]))
        return out
    right = []
    for entry in item["ground_truth"]:
        for name, params in entry.items():
            right.append({"name": tool_name(name),
                          "arguments": {k: _first(v) for k, v in params.items() if _first(v) is not None}})
    out = [("the possible answer", right), ("no call", None), ("empty call list", []),
           ("calls reversed", list(reversed(right))), ("a call twice", right + right[:1]),
           ("dotted name", [{**c, "name": next((n for n in fns if tool_name(n) == c["name"]), c["name"])}
                            for c in right]),
           ("unknown function", [{**right[0], "name": "not_" + right[0]["name"]}] + right[1:])]
    if len(right) > 1:
        out.append(("a call missing", right[:-1]))
    first = right[0]
    fn = fns.get(next((n for n in fns if tool_name(n) == first["name"]), ""), {})
    props = (fn.get("parameters") or {}).get("properties") or {}
    required = (fn.get("parameters") or {}).get("required") or []
    for key, value in first["arguments"].items():
        def variant(v, what, key=key):
            out.append((f"{key}: {what}", [{**first, "arguments": {**first["arguments"], key: v}}] + right[1:]))
        if isinstance(value, bool):
            variant(not value, "the other boolean")
        elif isinstance(value, int):
            variant(float(value), "as a float")
            variant(str(value), "as text")
            variant(value + 1, "off by one")
        elif isinstance(value, float):
            variant(int(value) if value.is_integer() else round(value, 1) + 0.05, "as an int / other float")
        elif isinstance(value, str):
            variant(value.upper(), "upper case")
            variant(value + " please", "words added")
            variant(f" {value}.", "spaces and a full stop")
        elif isinstance(value, list):
            variant(list(reversed(value)), "reversed list")
            variant(tuple(value) and value[:-1], "an item fewer")
    for key in required:
        if key in first["arguments"]:
            args = {k: v for k, v in first["arguments"].items() if k != key}
            out.append((f"required {key} missing", [{**first, "arguments": args}] + right[1:]))
    out.append(("an unknown argument", [{**first, "arguments": {**first["arguments"], "zz_extra": 1}}] + right[1:]))
    for key, prop in props.items():
        if key not in required and "default" in prop and key not in first["arguments"]:
            out.append((f"optional {key} at its default",
                        [{**first, "arguments": {**first["arguments"], key: prop["default"]}}] + right[1:]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per", type=int, default=6, help="items per category (default 6)")
    ap.add_argument("--out", type=Path, help="write the table here")
    args = ap.parse_args()
    from toolpath.evals.benchmarks import bfcl_data
    from toolpath.evals.benchmarks.bfcl import score_case

    runner, handler = package_runner()
    cases = []

    def add(case_id: str, what: str, case: dict, off: float) -> None:
        tp = score_case(case, "toolpath")
        cases.append({"id": case_id, "what": what, "case": case, "official": off, "toolpath": tp,
                      "agrees": score_case(case, "official") == off,
                      "kind": "" if tp == off else f"toolpath accepts: {what}" if tp > off else
                      f"toolpath refuses: {what}"})

    for category in bfcl_data.CATEGORIES:
        if category in bfcl_data.MULTI_TURN_CATEGORIES:
            continue
        for item in bfcl_data.load(category)[:args.per]:
            item = {**item, "category": category}
            for n, (what, calls) in enumerate(responses(item)):
                case = {"item": {k: item.get(k) for k in ("id", "category", "function", "ground_truth")},
                        "calls": calls}
                add(f"{item['id']}-{n}", what, case, official(runner, handler, item, calls))
    for category in bfcl_data.MULTI_TURN_CATEGORIES:
        for item in bfcl_data.load(category)[:args.per]:
            item = {k: item[k] for k in ("id", "involved_classes", "initial_config", "ground_truth")}
            item["category"] = category
            for n, (what, turns) in enumerate(conversations(item)):
                add(f"{item['id']}-{n}", what, {"item": item, "turns": turns},
                    official_multi_turn(runner, handler, item, turns))
    agree = sum(c.pop("agrees") for c in cases)
    print(f"{len(cases)} cases, official mode agrees with the package on {agree} "
          f"({100.0 * agree / len(cases):.1f} %); toolpath differs on "
          f"{sum(1 for c in cases if c['kind'])}")
    if args.out:
        from toolpath.evals.benchmarks.bfcl_data import version

        table = {"benchmark": "bfcl",
                 "official_code": f"bfcl-eval {version()} (PyPI), eval_checker/eval_runner.py "
                                  "_evaluate_single_ast_entry / _evaluate_single_relevance_entry / "
                                  "_evaluate_single_multi_turn_entry with the gpt-4o-2024-11-20-FC handler's "
                                  "decode_ast / decode_execute",
                 "scorer": "toolpath.evals.benchmarks.bfcl:score_case", "cases": cases}
        args.out.write_text(json.dumps(table, ensure_ascii=False) + "\n")
    return 0 if agree == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())

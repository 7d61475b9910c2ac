"""BFCL's official scoring of one response's function calls: the package's own AST checker
(bfcl_eval/eval_checker/ast_eval/ast_checker.py), run unchanged on the calls an episode recorded.

The checker module imports `bfcl_eval.constants.model_config` at load time only to ask one thing of the model
being scored: whether its provider turns "." in function names into "_" (`underscore_to_dot`). That module
imports every provider SDK the package depends on, which toolpath never installs, so the checker is loaded
with that one module standing in: a mapping that answers for toolpath, which exposes `math.factorial` to a
model as `math_factorial` as OpenAI-style function calling must. Nothing else of the checker is touched.

What the package does around the checker is reproduced here and named: its function-calling handlers decode
a response into `[{name: arguments}]` (decode_ast), the runner refuses what is not in that shape
(is_function_calling_format_output), and the relevance runner calls a response with no call (`[]`,
`[{}]`) empty (is_empty_output). benchmarks/scoring_cases/bfcl_cases.py checks all of it against the package's
own runner on the same outputs.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from functools import lru_cache
from typing import Any

from .bfcl_data import RELEVANCE_CATEGORIES, package_dir

MODEL_NAME = "toolpath"  # the model name the checker is given: its config says names had "." made "_"


@lru_cache(maxsize=1)
def checker() -> types.ModuleType:
    """The package's ast_checker module, loaded from its file with the model-config module standing in."""
    path = package_dir() / "eval_checker" / "ast_eval" / "ast_checker.py"
    name = "bfcl_eval.constants.model_config"
    stand_in = types.ModuleType(name)
    stand_in.MODEL_CONFIG_MAPPING = {MODEL_NAME: types.SimpleNamespace(underscore_to_dot=True)}
    saved = sys.modules.get(name)
    sys.modules[name] = stand_in
    try:
        spec = importlib.util.spec_from_file_location("toolpath_bfcl_ast_checker", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:  # the stand-in is seen by the checker only, never left for anyone else who imports the package
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved
    return module


def decoded(calls: Any) -> list:
    """The calls in the shape the package's function-calling handlers decode a response to: [{name: args}]."""
    if not isinstance(calls, list):
        return []
    return [{c.get("name"): c.get("arguments")} for c in calls if isinstance(c, dict)]


def is_call_list(output: Any) -> bool:
    """The package's is_function_calling_format_output: a list of one-key dicts whose value is a dict."""
    return isinstance(output, list) and all(
        isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item.values())), dict) for item in output)


def is_empty(output: Any) -> bool:
    """The package's is_empty_output: not a call list, `[]` or `[{}]`."""
    return not is_call_list(output) or len(output) == 0 or (len(output) == 1 and len(output[0]) == 0)


def check(category: str, functions: list[dict], ground_truth: Any, calls: list[dict] | None) -> tuple[bool, str]:
    """(right, why) for one response: `calls` the recorded calls ({"name", "arguments"}), None when the
    response made none (a plain answer)."""
    output = decoded(calls) if calls is not None else []
    if category in RELEVANCE_CATEGORIES:
        has_call = not is_empty(output)
        right = has_call if category == "live_relevance" else not has_call
        return right, "" if right else ("made a function call" if has_call else "made no function call")
    if not is_call_list(output):
        return False, "the response is not a list of function calls"
    mod = checker()
    result = mod.ast_checker(functions, output, ground_truth, mod.Language.PYTHON, category, MODEL_NAME)
    if result.get("valid"):
        return True, ""
    return False, f"{result.get('error_type', '')}: {result.get('error')}"

"""BFCL's data as the pinned `bfcl-eval` package ships it: its categories, each item's question, functions and
possible answers, and the package's version (stored with every score).

The files are read straight from the installed package (data/BFCL_v4_<category>.json, one JSON object a line,
and data/possible_answer/ beside them), never through `bfcl_eval.utils`: importing that module creates result
folders beside the package. A multi-turn item names the backend classes it involves; its functions are those
classes' documents (data/multi_turn_func_doc/), as the package's populate_test_cases_with_predefined_functions
adds them, and each item is checked here so that bad data is refused before an episode starts.
"""

from __future__ import annotations

import copy
import importlib.util
from functools import cache, lru_cache
from pathlib import Path

from . import BenchmarkDataError, read_json_lines

PACKAGE = "bfcl-eval"
INSTALL = "pip install --no-deps bfcl-eval==2026.3.23 (`make setup` does it)"

# The categories whose answer is one response's function calls, scored by the package's AST checker
# (`relevance`: any call is right; `irrelevance`: none is).
AST_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
                  "live_parallel", "live_parallel_multiple")
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")
# Conversations whose calls run on the package's in-process backends, scored by its multi-turn checker.
# multi_turn_miss_func is not run: its functions arrive in the middle of the conversation.
MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_miss_param", "multi_turn_long_context")
CATEGORIES = AST_CATEGORIES + RELEVANCE_CATEGORIES + MULTI_TURN_CATEGORIES
# The backends of the multi-turn categories: in-memory simulations (file system, messaging, trading, travel, a
# car, ...). The package's other backends (web search, memory) reach the network or write files: never run.
MULTI_TURN_CLASSES = ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot",
                      "TravelAPI", "VehicleControlAPI")
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
                                 f"{', '.join(CATEGORIES)} (multi_turn_miss_func, memory, web_search and the Java "
                                 "and JavaScript ones are not run)")
    return category


def _lines(path: Path, key: str = "id") -> list[dict]:
    if not path.is_file():
        raise BenchmarkDataError(f"BFCL data file not found: {path} (reinstall {INSTALL})")
    out = []
    for n, row in read_json_lines(path, "BFCL data file"):
        if not isinstance(row, dict) or not isinstance(row.get(key), str):
            raise BenchmarkDataError(f"{path}:{n}: expected an object with a{'n' if key == 'id' else ''} {key}")
        out.append(row)
    return out


@cache
def load(category: str) -> tuple[dict, ...]:
    """The category's items in file order, each {id, question, function, ground_truth (AST and multi-turn
    categories)}; a multi-turn item also has its involved_classes and initial_config."""
    check_category(category)
    data = package_dir() / "data"
    items = _lines(data / f"BFCL_v4_{category}.json")
    if category in AST_CATEGORIES + MULTI_TURN_CATEGORIES:
        answers = _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")
        if len(answers) != len(items):  # the package pairs them by position, so do we
            raise BenchmarkDataError(f"BFCL {category}: {len(items)} items but {len(answers)} possible answers")
        for item, answer in zip(items, answers):
            item["ground_truth"] = answer.get("ground_truth")
    if category in MULTI_TURN_CATEGORIES:
        for item in items:
            check_multi_turn(item)
            item["function"] = copy.deepcopy(class_functions(item["involved_classes"]))
    for item in items:
        for fn in item.get("function") or []:
            fn["description"] = str(fn.get("description", "")) + PYTHON_HINT
    return tuple(items)


@cache
def _class_doc(class_name: str) -> tuple[dict, ...]:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    docs = package_dir() / "data" / "multi_turn_func_doc"
    return tuple(_lines(docs / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name], key="name"))


def class_functions(classes: list[str]) -> list[dict]:
    """The function documents of a multi-turn item's classes, in order, as the package lists them for a model
    (shared: copy before changing one)."""
    return [fn for name in classes for fn in _class_doc(name)]


def check_multi_turn(item: dict) -> None:
    """Refuse, naming the item, a multi-turn item whose turns, classes, starting state or possible answer are not
    what the package's backends and checker take."""
    where = f"BFCL item {item.get('id')}"
    classes = item.get("involved_classes")
    if not isinstance(classes, list) or not classes:
        raise BenchmarkDataError(f"{where}: involved_classes must be a non-empty list of backend class names")
    unknown = [c for c in classes if c not in MULTI_TURN_CLASSES]
    if unknown:
        raise BenchmarkDataError(f"{where}: involved class {unknown[0]!r} is not one of the multi-turn backends "
                                 f"({', '.join(MULTI_TURN_CLASSES)})")
    config = item.get("initial_config", {})
    if not isinstance(config, dict):
        raise BenchmarkDataError(f"{where}: initial_config must be an object of class name to starting state, "
                                 f"got {type(config).__name__}")
    bad = [name for name, state in config.items() if not isinstance(state, dict)]
    if bad:
        raise BenchmarkDataError(f"{where}: initial_config[{bad[0]!r}] must be an object (the class's starting "
                                 f"state), got {type(config[bad[0]]).__name__}")
    turns = item.get("question")
    if not isinstance(turns, list) or not turns or not all(
            isinstance(t, list) and all(isinstance(m, dict) for m in t) for t in turns):
        raise BenchmarkDataError(f"{where}: question must be a non-empty list of turns, each a list of messages")
    truth = item.get("ground_truth")
    if not isinstance(truth, list) or len(truth) != len(turns) or not all(
            isinstance(t, list) and all(isinstance(c, str) for c in t) for t in truth):
        raise BenchmarkDataError(f"{where}: the possible answer must list each of its {len(turns)} turns' calls")

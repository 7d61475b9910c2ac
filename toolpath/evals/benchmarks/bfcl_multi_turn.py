"""BFCL's multi-turn items as episodes: the package's in-process backends run the calls, their results are the
model's observations, and the user's later turns arrive as the task's follow-ups (agents/user_turns.py).

Each item's functions are the methods of its involved classes (GorillaFileSystem, TradingBot, ...). A run gets
its own instances, made as the package's execute_multi_turn_func_call makes them (the class, then
`_load_scenario` with a copy of the item's initial_config for that class, long_context for that category), and
each call runs the method itself with the model's arguments, its result made text as the package makes it
("Error during execution: ..." when the method raises). Nothing a model writes is evaluated as code: the
package builds a call's text and `eval`s it; here the method is looked up by the tool's name and called.

A run's instances are kept by run id while it runs (the last few runs); a run resumed in another process gets
them back by replaying, on fresh instances, every call its transcript shows as run.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import threading
from collections import OrderedDict
from typing import Any

from ...tools.registry import ToolContext, ToolError, ToolResult
from . import BenchmarkDataError
from .bfcl_tools import FunctionTool

KEPT_RUNS = 8  # runs whose instances stay in memory; an older one that calls again is replayed


def instances(item: dict) -> dict[str, Any]:
    """Fresh backend instances for the item, each in the item's starting state; BenchmarkDataError naming the
    item when a class will not load its initial_config."""
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

    long_context = "long_context" in item["id"]  # as the package decides it, from the item's category
    out = {}
    for name in item["involved_classes"]:
        instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)()
        if name not in STATELESS_CLASSES:
            try:
                instance._load_scenario(copy.deepcopy(item.get("initial_config", {}).get(name, {})),
                                        long_context=long_context)
            except Exception as err:  # noqa: BLE001 — the package's own code on the data's values
                raise BenchmarkDataError(f"BFCL item {item['id']}: initial_config[{name!r}] is not a starting "
                                         f"state {name} loads: {type(err).__name__}: {err}") from None
        out[name] = instance
    return out


def methods(objects: dict[str, Any]) -> dict[str, Any]:
    """Public method name → bound method; a name two classes share is the later class's, as in the package."""
    out = {}
    for instance in objects.values():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                out[name] = method
    return out


def execute(table: dict[str, Any], name: str, arguments: dict) -> str:
    """One call's result as the package reports it to the model."""
    method = table.get(name)
    if method is None:
        return f"Error during execution: name '{name}' is not defined"
    try:
        result = method(**arguments)
    except Exception as err:  # noqa: BLE001 — the backend's own errors are what the model is shown
        return f"Error during execution: {err}"
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


class Runs:
    """The backend instances of each running episode, by run id (bounded; see the module's doc)."""

    def __init__(self, keep: int = KEPT_RUNS):
        self.keep, self._tables, self._lock = keep, OrderedDict(), threading.Lock()

    def table(self, item: dict, ctx: ToolContext | None) -> dict[str, Any]:
        site = ctx.caller if ctx is not None else None
        if site is None or not ctx.run_id:  # called outside an episode: the item's starting state every time
            return methods(instances(item))
        key = (ctx.run_id, item["id"])
        with self._lock:
            table = self._tables.get(key)
            if table is not None:
                self._tables.move_to_end(key)
                return table
        table = methods(instances(item))
        for name, arguments in _calls_run(site.rt.transcript):
            execute(table, name, arguments)
        with self._lock:
            self._tables[key] = table
            while len(self._tables) > self.keep:
                self._tables.popitem(last=False)
        return table


def _calls_run(transcript: list) -> list[tuple[str, dict]]:
    """The calls the transcript shows as run (a tool message answers each), in order."""
    answered = {m.tool_call_id for m in transcript if m.role == "tool" and m.tool_call_id}
    return [(c.name, c.arguments) for m in transcript if m.role == "assistant" for c in m.tool_calls
            if c.id in answered and isinstance(c.arguments, dict)]


RUNS = Runs()


class ExecutingTool(FunctionTool):
    """One method of an item's backends: the call runs on the episode's instances."""

    item: dict

    def call(self, arguments: Any, ctx: ToolContext | None = None) -> ToolResult:
        self.validate(arguments)
        try:
            table = RUNS.table(self.item, ctx)
        except BenchmarkDataError as err:
            raise ToolError(str(err)) from None
        return ToolResult(content=execute(table, self.name, arguments))

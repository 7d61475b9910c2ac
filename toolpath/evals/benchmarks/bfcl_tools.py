"""An item's BFCL functions as the episode's tools: they run nothing, they record.

BFCL scores one response: the function calls a model makes to the question are its answer. Each function is a
Tool whose schema is the item's (BFCL's types as JSON schema, as the package's function-calling handlers send
them) and whose call keeps the arguments exactly as the model wrote them (no coercion: the checker judges
types). The last of a step's calls to these functions ends the run, with every call of that step as the
answer (`answer_text`), so the calls the model makes after seeing "recorded" never change what is scored.

The tools are registered (registry kind `tool`) under the names the model sees, in the process that builds the
item's task, replacing the previous item's; a name that a toolpath tool already has is refused.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from ... import registry
from ...tools.registry import Tool, ToolContext, ToolError, ToolResult, load_tools
from . import BenchmarkDataError

ANSWER_KEY = "bfcl_calls"
TAG = "bfcl"
# OpenAI-style function calling takes names of ^[a-zA-Z0-9_-]{1,64}$; BFCL's have dots (math.factorial), which
# become "_" as the package's own function-calling handlers do (underscore_to_dot).
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(function_name: str) -> str:
    return _NOT_IN_NAME.sub("_", function_name)[:64]


def _openapi(schema: Any) -> Any:
    """BFCL's parameter types (dict, float, tuple, any) as JSON schema's, everywhere in the schema."""
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    if isinstance(schema, list):
        return [_openapi(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _openapi(v) for k, v in schema.items()}
    if isinstance(schema.get("type"), str):
        out["type"] = GORILLA_TO_OPENAPI.get(schema["type"], schema["type"])
    if "properties" in schema and isinstance(schema["properties"], dict):  # names, not schemas, at this level
        out["properties"] = {k: _openapi(v) for k, v in schema["properties"].items()}
    return out


def answer_text(calls: list[dict]) -> str:
    return json.dumps({ANSWER_KEY: calls}, ensure_ascii=False)


def read_answer(answer: Any) -> list[dict] | None:
    """The calls an answer holds, or None for an answer that made none (plain text)."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except (ValueError, RecursionError):
            return None
    calls = answer.get(ANSWER_KEY) if isinstance(answer, dict) else None
    return calls if isinstance(calls, list) else None


class FunctionTool(Tool):
    """One BFCL function as a tool: the item's schema, and the arguments kept exactly as the model wrote them."""

    parameters: dict
    siblings: frozenset  # the names of the item's functions, this one's included

    def schema(self) -> dict:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def validate(self, arguments: Any) -> Any:
        if not isinstance(arguments, dict):
            raise ToolError(f"{self.name}: arguments must be a JSON object, got {type(arguments).__name__}")
        return arguments


class RecordingTool(FunctionTool):
    """One BFCL function: its call is recorded, never run."""

    def call(self, arguments: Any, ctx: ToolContext | None = None) -> ToolResult:
        self.validate(arguments)
        site = ctx.caller if ctx is not None else None
        if site is None:  # called outside an agent's step: nothing to end
            return ToolResult(content="recorded")
        pending = [c for c in site.state.get("pending") or [] if isinstance(c, dict)]
        if any(c.get("name") in self.siblings for c in pending[site.index + 1:]):
            return ToolResult(content="recorded")
        calls = [{"name": c.get("name"), "arguments": c.get("arguments", {})} for c in pending
                 if c.get("name") != "final_answer"]
        return ToolResult(content="recorded", final=True) if not calls else \
            ToolResult(content=answer_text(calls), final=True)


def register(functions: list[dict], kind: type[FunctionTool] = RecordingTool, **fields: Any) -> list[str]:
    """Register the item's functions as tools of `kind` (recording ones by default; `fields` set on each);
    their names as the model sees them."""
    existing = load_tools()
    names = [tool_name(str(f.get("name", ""))) for f in functions]
    siblings = frozenset(names)
    for fn, name in zip(functions, names):
        if not name:
            raise BenchmarkDataError(f"a BFCL function has no name: {str(fn)[:200]}")
        old = existing.get(name)
        if old is not None and TAG not in old.tags:
            raise BenchmarkDataError(f"BFCL function {fn['name']!r} has the name of toolpath's tool {name!r}")
        params = _openapi(copy.deepcopy(fn.get("parameters") or {"type": "dict", "properties": {}}))
        t = kind(name=name, description=str(fn.get("description", "")), fn=lambda **_: None,
                 args_model=None, timeout=None, cost=0.0, quality=1.0, ctx_param=None, tags=(TAG,))
        t.parameters, t.siblings = params, siblings
        for key, value in fields.items():
            setattr(t, key, value)
        registry.add("tool", name, t)
    return names

"""Response grammars: how a model that has no native tool calling writes a call, and how we read it back.

Model output is untrusted data. The parser is tolerant (fenced JSON, single quotes, trailing commas, a missing
closing tag) but never guesses silently: whatever looks like a call and cannot be read becomes an *issue*
that goes back to the model as an observation saying what was wrong. A call is never dropped without one.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..state import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_FENCE = re.compile(r"```(?:json|tool_call|tool)?\s*\n?(.*?)```", re.S)


@dataclass
class Parsed:
    content: str  # the text outside any tool call
    calls: list[ToolCall] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)


def render_tools(schemas: list[dict]) -> str:
    """The system-prompt section that teaches the JSON tool-call format."""
    lines = [
        "You can use tools. To call a tool, write exactly one line like:",
        f'{OPEN}{{"name": "calculator", "arguments": {{"expression": "2 + 3"}}}}{CLOSE}',
        "You will get the result back. When you know the answer, call final_answer or reply with the answer alone.",
        "Tools:",
    ]
    for s in schemas:
        props = s.get("parameters", {}).get("properties", {})
        args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
        lines.append(f"- {s['name']}({args}): {s.get('description', '')}")
    return "\n".join(lines)


def demonstration(schemas: list[dict]) -> list[dict]:
    """A worked exchange in this format (question, call, result, answer), as chat turns.

    Small local models follow a shown example far better than a described one: with it, SmolLM2-135M calls
    the calculator on a share of the built-in arithmetic questions; without it, on none. It uses the
    calculator, so it is only given when the episode has that tool.
    """
    if not any(s.get("name") == "calculator" for s in schemas):
        return []
    return [
        {"role": "user", "content": "What is 12 times 7? Use the calculator tool, then give the number."},
        {"role": "assistant", "content": f'{OPEN}{{"name": "calculator", "arguments": {{"expression": "12 * 7"}}}}{CLOSE}'},
        {"role": "user", "content": "Result of calculator: 84"},
        {"role": "assistant", "content": "84"},
    ]


def _snippet(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def loads_lenient(text: str) -> Any:
    """JSON, else JSON without trailing commas, else a Python literal (single quotes, True/None)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        fixed = re.sub(r",\s*([}\]])", r"\1", text)
        try:
            return json.loads(fixed)
        except json.JSONDecodeError:
            pass
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise first from None
        if isinstance(value, dict):
            return value
        raise first from None


def _to_call(obj: Any, idx: int, call_id: str) -> tuple[ToolCall | None, str | None]:
    if not isinstance(obj, dict):
        return None, f"tool call {idx}: expected a JSON object with \"name\" and \"arguments\", got {type(obj).__name__}"
    if "function" in obj and isinstance(obj["function"], dict):  # OpenAI's {"type": "function", "function": {...}}
        obj = obj["function"]
    name = obj.get("name") or obj.get("tool")
    if not isinstance(name, str) or not name.strip():
        return None, f"tool call {idx}: missing \"name\" (a string naming the tool)"
    args = obj.get("arguments", obj.get("parameters", obj.get("args", {})))
    if isinstance(args, str):
        try:
            args = loads_lenient(args) if args.strip() else {}
        except json.JSONDecodeError as err:
            return None, f"tool call {idx} ({name}): \"arguments\" is a string that is not valid JSON: {err.msg}"
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None, f"tool call {idx} ({name}): \"arguments\" must be an object, got {type(args).__name__}"
    return ToolCall(id=call_id, name=name.strip(), arguments=args), None


def _json_objects(text: str) -> list[tuple[int, int, Any]]:
    """Every top-level JSON object in free text, as (start, end, value)."""
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return out
        try:
            value, end = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        out.append((i, end, value))
        i = end


def parse_tool_calls(text: str, id_prefix: str = "call") -> Parsed:
    """Read `<tool_call>{…}</tool_call>` blocks (or, failing those, fenced or bare JSON calls) from model text."""
    text = text or ""
    calls: list[ToolCall] = []
    issues: list[str] = []
    outside: list[str] = []

    def add(payload: str, closed: bool) -> None:
        idx = len(calls) + len(issues) + 1
        body = payload.strip()
        fence = _FENCE.fullmatch(body)
        if fence:
            body = fence.group(1).strip()
        try:
            obj = loads_lenient(body)
        except json.JSONDecodeError as err:
            tail = "" if closed else f" and has no closing {CLOSE}"
            issues.append(f"tool call {idx} is not valid JSON{tail} ({err.msg} at column {err.colno}): {_snippet(body)}")
            return
        call, problem = _to_call(obj, idx, f"{id_prefix}_{len(calls) + 1}")
        if call:
            calls.append(call)
        else:
            issues.append(problem)

    if OPEN in text:
        pos = 0
        while True:
            start = text.find(OPEN, pos)
            if start < 0:
                outside.append(text[pos:])
                break
            outside.append(text[pos:start])
            end = text.find(CLOSE, start)
            nxt = text.find(OPEN, start + len(OPEN))
            if end < 0 or (0 <= nxt < end):  # unclosed: the call runs to the next opening tag or the end
                stop = nxt if nxt >= 0 else len(text)
                add(text[start + len(OPEN): stop], closed=False)
                pos = stop
            else:
                add(text[start + len(OPEN): end], closed=True)
                pos = end + len(CLOSE)
        content = "".join(outside)
    else:
        content = text
        spans = []
        for m in _FENCE.finditer(text):
            body = m.group(1).strip()
            if body.startswith("{") and re.search(r'["\']name["\']\s*:', body):
                spans.append((m.start(), m.end()))
                add(body, closed=True)
        if not spans:
            for start, end, value in _json_objects(text):
                if isinstance(value, dict) and isinstance(value.get("name"), str) and (
                        "arguments" in value or "parameters" in value):
                    spans.append((start, end))
                    call, problem = _to_call(value, len(calls) + len(issues) + 1, f"{id_prefix}_{len(calls) + 1}")
                    calls.append(call) if call else issues.append(problem)
        for start, end in reversed(spans):
            content = content[:start] + content[end:]
    content = content.replace(CLOSE, "").strip()
    return Parsed(content=content, calls=calls, issues=issues)


def issue_feedback(issues: list[str]) -> str:
    """The observation text that tells the model what was wrong with its calls and how to write one."""
    return ("Your last message had tool calls that could not be used:\n- " + "\n- ".join(issues) +
            f'\nWrite each call as {OPEN}{{"name": "TOOL", "arguments": {{...}}}}{CLOSE} with valid JSON.')

"""The JSON tool-call grammar: `<tool_call>{"name": …, "arguments": …}</tool_call>`, any number per turn.

A model without native tool calling writes its calls this way; the parser also takes fenced or bare JSON
calls when no tag is present. What cannot be read becomes an issue (see common.py for the limits).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...state import ToolCall
from .common import MAX_BLOCK_CHARS, MAX_CALLS, Parsed, cap_issues, cut, loads_lenient, make_call, read_reply, snippet

OPEN, CLOSE = "<tool_call>", "</tool_call>"
# Possessive `\s*+`: with a lazy body after it, a plain `\s*` retried every split of a long whitespace run.
_FENCE = re.compile(r"```(?:json|tool_call|tool)?\s*+(.*?)```", re.S)
MAX_JSON_ATTEMPTS = 100      # '{"' in free text that start no JSON object before the search for bare calls stops
_DECODER = json.JSONDecoder()


# A value of each JSON Schema type for the example call: its shape only, never a value to copy.
_EXAMPLE_VALUES = {"string": "...", "integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}


def example_call(schema: dict) -> str:
    """One call of the run's own tool, with its own argument names (its required ones, else its first): an
    example naming any other tool taught small models that tool's arguments."""
    props = (schema.get("parameters") or {}).get("properties") or {}
    required = [k for k in (schema.get("parameters") or {}).get("required") or [] if k in props]
    names = required or list(props)[:1]
    args = {k: _EXAMPLE_VALUES.get(props[k].get("type") if isinstance(props[k], dict) else None, "...")
            for k in names}
    return f"{OPEN}{json.dumps({'name': schema['name'], 'arguments': args})}{CLOSE}"


def render_tools(schemas: list[dict]) -> str:
    """The system-prompt section that teaches the JSON tool-call format."""
    lines = [
        "You can use tools. To call a tool, write exactly one line like:",
        *([example_call(schemas[0])] if schemas else []),
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
        {"role": "assistant",
         "content": f'{OPEN}{{"name": "calculator", "arguments": {{"expression": "12 * 7"}}}}{CLOSE}'},
        {"role": "user", "content": "Result of calculator: 84"},
        {"role": "assistant", "content": "84"},
    ]


def _to_call(obj: Any, idx: int, call_id: str) -> tuple[ToolCall | None, str | None]:
    if not isinstance(obj, dict):
        return None, (f"tool call {idx}: expected a JSON object with \"name\" and \"arguments\", "
                      f"got {type(obj).__name__}")
    if "function" in obj and isinstance(obj["function"], dict):  # OpenAI's {"type": "function", "function": {...}}
        obj = obj["function"]
    name = obj.get("name") or obj.get("tool")
    if not isinstance(name, str) or not name.strip():
        return None, f"tool call {idx}: missing \"name\" (a string naming the tool)"
    name = name.strip()
    label = f"tool call {idx} ({snippet(name, 40)})"
    args = obj.get("arguments", obj.get("parameters", obj.get("args", {})))
    if isinstance(args, str):
        try:
            args = loads_lenient(args) if args.strip() else {}
        except json.JSONDecodeError as err:
            return None, f"{label}: \"arguments\" is a string that is not valid JSON: {err.msg}"
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None, f"{label}: \"arguments\" must be an object, got {type(args).__name__}"
    return make_call(call_id, name, args, label)


def _decode_object(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value that starts at `start` and where it ends, or None.

    It decodes a window of the text, not the text from `start` on: a failed decode's error message counts the
    lines before its position, which over a whole reply made each attempt cost the reply's length.
    """
    width = 4096
    while True:
        chunk = text[start:start + width]
        try:
            value, end = _DECODER.raw_decode(chunk)
            return value, start + end
        except json.JSONDecodeError as err:
            # A failure near the end of a window that ends before the text does may be the window's doing
            # (a cut inside `true`, a number or a \u escape): read a wider one.
            cut_short = start + len(chunk) < len(text) and (err.pos >= len(chunk) - 64 or
                                                            err.msg.startswith("Unterminated string"))
            if not cut_short or width >= MAX_BLOCK_CHARS:
                return None
            width *= 4
        except (RecursionError, ValueError):  # nested too deeply; an integer over Python's digit limit
            return None


_OBJECT_START = re.compile(r'\{\s*+"')  # a JSON object with at least one key: '{' alone is just text


def _scan_json_objects(text: str) -> tuple[list[tuple[int, int, Any]], int | None]:
    """Every top-level JSON object in free text as (start, end, value), and where the search stopped when it
    gave up (after MAX_JSON_ATTEMPTS '{"' that started no object), else None."""
    out, pos, failures = [], 0, 0
    while True:
        m = _OBJECT_START.search(text, pos)
        if m is None:
            return out, None
        got = _decode_object(text, m.start())
        if got is None:
            failures += 1
            if failures >= MAX_JSON_ATTEMPTS:
                return out, m.start()
            pos = m.start() + 1
            continue
        out.append((m.start(), got[1], got[0]))
        pos = got[1]


def json_objects(text: str) -> list[tuple[int, int, Any]]:
    """Every top-level JSON object in free text, as (start, end, value) (bounded: see _scan_json_objects)."""
    return _scan_json_objects(text)[0]


class _Calls:
    """The calls and issues read from one reply: at most MAX_CALLS calls are read, the rest are counted."""

    def __init__(self, id_prefix: str):
        self.id_prefix = id_prefix
        self.calls: list[ToolCall] = []
        self.issues: list[str] = []
        self.seen = 0     # calls read (each became a call or an issue)
        self.skipped = 0  # calls past MAX_CALLS, not read

    def _next(self) -> int | None:
        if self.seen >= MAX_CALLS:
            self.skipped += 1
            return None
        self.seen += 1
        return self.seen

    def _keep(self, call: ToolCall | None, problem: str | None) -> None:
        self.calls.append(call) if call else self.issues.append(problem)

    def add_value(self, obj: Any) -> None:
        idx = self._next()
        if idx is not None:
            self._keep(*_to_call(obj, idx, f"{self.id_prefix}_{len(self.calls) + 1}"))

    def add_text(self, payload: str, closed: bool) -> None:
        idx = self._next()
        if idx is None:
            return
        body = payload.strip()
        if len(body) > MAX_BLOCK_CHARS:
            self.issues.append(f"tool call {idx} is {len(body):,} characters long (at most {MAX_BLOCK_CHARS:,} are "
                               f"read): {snippet(body)}")
            return
        fence = _FENCE.fullmatch(body)
        if fence:
            body = fence.group(1).strip()
        try:
            obj = loads_lenient(body)
        except json.JSONDecodeError as err:
            tail = "" if closed else f" and has no closing {CLOSE}"
            where = f" at column {err.colno}" if err.pos else ""
            self.issues.append(f"tool call {idx} is not valid JSON{tail} ({err.msg}{where}): {snippet(body)}")
            return
        self._keep(*_to_call(obj, idx, f"{self.id_prefix}_{len(self.calls) + 1}"))

    def all_issues(self) -> list[str]:
        """The issues, what was not read first: it must survive cap_issues."""
        skipped = ([f"your reply has {self.seen + self.skipped:,} tool calls; only the first {MAX_CALLS} were read "
                    f"and the other {self.skipped:,} were not run"] if self.skipped else [])
        return skipped + self.issues


def _tagged_calls(text: str, found: _Calls) -> str:
    """Read every <tool_call> block; the text outside them. An unclosed block runs to the next opening tag or
    the end. Each search goes forward from the last, so the whole reply is scanned a bounded number of times."""
    opens = [m.start() for m in re.finditer(re.escape(OPEN), text)]
    closes = [m.start() for m in re.finditer(re.escape(CLOSE), text)]
    outside, ci = [text[:opens[0]]], 0
    for k, start in enumerate(opens):
        nxt = opens[k + 1] if k + 1 < len(opens) else len(text)
        while ci < len(closes) and closes[ci] < start:
            ci += 1
        end = closes[ci] if ci < len(closes) else -1
        if end < 0 or nxt < end:
            found.add_text(text[start + len(OPEN): nxt], closed=False)
            after = nxt
        else:
            found.add_text(text[start + len(OPEN): end], closed=True)
            after = end + len(CLOSE)
        outside.append(text[after:nxt])
    return "".join(outside)


def _untagged_calls(text: str, found: _Calls) -> str:
    """Fenced JSON calls, else bare JSON objects that look like calls; the text without them."""
    spans = []
    for m in _FENCE.finditer(text):
        body = m.group(1).strip()
        if body.startswith("{") and re.search(r'["\']name["\']\s*:', body):
            spans.append((m.start(), m.end()))
            found.add_text(body, closed=True)
    if not spans:
        objects, stopped = _scan_json_objects(text)
        for start, end, value in objects:
            if isinstance(value, dict) and isinstance(value.get("name"), str) and (
                    "arguments" in value or "parameters" in value):
                spans.append((start, end))
                found.add_value(value)
        if stopped is not None:
            found.issues.append(f"stopped looking for JSON tool calls at character {stopped:,}: the reply has over "
                                f"{MAX_JSON_ATTEMPTS} '{{' that start no valid JSON object")
    return cut(text, spans)


def parse_tool_calls(text: str, id_prefix: str = "call") -> Parsed:
    """Read `<tool_call>{…}</tool_call>` blocks (or, failing those, fenced or bare JSON calls) from model text."""
    text, issues = read_reply(text)
    found = _Calls(id_prefix)
    content = _tagged_calls(text, found) if OPEN in text else _untagged_calls(text, found)
    content = content.replace(CLOSE, "").strip()
    return Parsed(content=content, calls=found.calls, issues=cap_issues(issues + found.all_issues()))


def issue_feedback(issues: list[str]) -> str:
    """The observation text that tells the model what was wrong with its calls and how to write one."""
    return ("Your last message had tool calls that could not be used:\n- " + "\n- ".join(issues) +
            f'\nWrite each call as {OPEN}{{"name": "TOOL", "arguments": {{...}}}}{CLOSE} with valid JSON.')


class JSONFormat:
    """`<tool_call>{"name": …, "arguments": …}</tool_call>`, any number per turn; plain text is the answer."""

    name = "json"
    stop: tuple[str, ...] = (CLOSE,)
    max_steps: int | None = None  # no turn limit of its own: the spec's limits apply
    native_tools = True  # a server with function calling gets the tools natively instead of this grammar
    text_is_answer = True
    no_action = "Your reply was empty. Call a tool, or reply with the answer."

    def guide(self, schemas: list[dict]) -> str:
        return render_tools(schemas)

    def demonstration(self, schemas: list[dict]) -> list[dict]:
        return demonstration(schemas)

    def parse(self, text: str, id_prefix: str = "call") -> Parsed:
        return parse_tool_calls(text, id_prefix)

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        tagged = "".join(f"\n{OPEN}{json.dumps({'name': c.name, 'arguments': c.arguments})}{CLOSE}" for c in calls)
        return (content + tagged).strip()

    def render_observation(self, tool: str, content: str) -> str:
        return f"Result of {tool or 'the tool'}: {content}"

    def feedback(self, issues: list[str]) -> str:
        return issue_feedback(issues)

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
    answer: str | None = None  # an explicit final answer (DeepEyesV2's <answer>); None when the grammar has none


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


# ---- response formats -----------------------------------------------------------------------------------
# A format is everything a text-generating policy needs to speak one grammar: the prompt section that teaches
# it, an optional worked example, the stop sequences, the parser, and how earlier turns (the model's own calls,
# tool results) are written back into the conversation. The react agent picks one per run
# (`agent: {name: react, params: {format: deepeyes}}`); every policy that produces text uses it.

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


CODE_OPEN, CODE_CLOSE = "<code>", "</code>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_ACTION_TAGS = {"code": (CODE_OPEN, CODE_CLOSE), "tool_call": (OPEN, CLOSE), "answer": (ANSWER_OPEN, ANSWER_CLOSE)}
_PY_FENCE = re.compile(r"^\s*```[ \t]*(?:python|py|python3)?[ \t]*\n?(.*?)(?:\n?```\s*)?$", re.S | re.I)
CODE_TOOL = "python"  # the tool a <code> block runs in


class DeepEyesFormat:
    """DeepEyesV2's grammar: `<think>…</think>` then exactly one action per turn:

        <code>```python …```</code>                              runs in the episode's Python kernel
        <tool_call>{"name": …, "arguments": {…}}</tool_call>     any other tool (search, image operations)
        <answer>…</answer>                                       ends the episode

    Generation stops after `</code>` or `</tool_call>`, so a turn holds one action and the model sees the
    result before it goes on. Servers drop the stop sequence from the text they return, so a missing closing
    tag at the very end is the normal case, not an error. Anything else that breaks the grammar (no action, two
    actions, an empty block, a stray closing tag, bad JSON) is an issue reported back to the model.
    """

    name = "deepeyes"
    stop: tuple[str, ...] = (CODE_CLOSE, CLOSE)
    max_steps: int | None = 9  # DeepEyesV2's turn limit
    native_tools = False
    text_is_answer = False
    no_action = (f"Your reply had no action. After {THINK_OPEN}…{THINK_CLOSE}, write exactly one of "
                 f"{CODE_OPEN}```python …```{CODE_CLOSE}, {OPEN}{{\"name\": …, \"arguments\": {{…}}}}{CLOSE} "
                 f"or {ANSWER_OPEN}…{ANSWER_CLOSE}.")

    def guide(self, schemas: list[dict]) -> str:
        names = {s["name"] for s in schemas}
        others = [s for s in schemas if s["name"] not in (CODE_TOOL, "final_answer")]
        lines = [f"Think first inside {THINK_OPEN}…{THINK_CLOSE}. Then write exactly one action:"]
        if CODE_TOOL in names:
            lines.append(f"- {CODE_OPEN}\n```python\n# code\n```\n{CODE_CLOSE} runs Python in a kernel that keeps "
                         "its variables. The task's images are loaded as image_1, image_2, … (PIL images). Print "
                         "what you need to see.")
        if others:
            lines.append(f'- {OPEN}{{"name": "TOOL", "arguments": {{…}}}}{CLOSE} calls one of these tools:')
            for s in others:
                props = s.get("parameters", {}).get("properties", {})
                args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
                lines.append(f"  - {s['name']}({args}): {s.get('description', '')}")
        lines.append(f"- {ANSWER_OPEN}your final answer{ANSWER_CLOSE} when you know it.")
        lines.append("You get the result of code or a tool call in the next message. One action per message.")
        return "\n".join(lines)

    def demonstration(self, schemas: list[dict]) -> list[dict]:
        # One question answered by a code turn, and no more: with a final <answer> in the example, SmolLM2-135M
        # copies that answer word for word; with the example ending at the code, it writes code of its own.
        if not any(s.get("name") == CODE_TOOL for s in schemas):
            return []
        return [
            {"role": "user", "content": "How many green pixels does image_1 have?"},
            {"role": "assistant", "content": f"{THINK_OPEN}I cannot count pixels by looking. I will count them with "
                                             f"code.{THINK_CLOSE}\n{CODE_OPEN}\n```python\nimport numpy as np\n"
                                             "a = np.asarray(image_1).astype(int)\n"
                                             "green = (a[..., 1] > 150) & (a[..., 0] < 100) & (a[..., 2] < 100)\n"
                                             f"print(int(green.sum()))\n```\n{CODE_CLOSE}"},
        ]

    def parse(self, text: str, id_prefix: str = "call") -> Parsed:
        text = text or ""
        issues: list[str] = []
        thoughts, rest = _split_think(text)
        actions = _find_actions(rest, issues)
        outside = rest
        for kind, start, end, body, closed in reversed(actions):
            outside = outside[:start] + outside[end:]
        content = "\n".join(t for t in thoughts + [outside.strip()] if t).strip()
        if issues:
            return Parsed(content=content, issues=issues)
        if not actions:
            return Parsed(content=content, issues=[self.no_action])
        if len(actions) > 1:
            kinds = ", ".join(f"<{a[0]}>" for a in actions)
            return Parsed(content=content, issues=[f"found {len(actions)} actions ({kinds}); write exactly one per "
                                                   f"message and wait for its result"])
        kind, _, _, body, closed = actions[0]
        if kind == "answer":
            if not body.strip():
                return Parsed(content=content, issues=[f"the {ANSWER_OPEN} block is empty"])
            return Parsed(content=content, answer=body.strip())
        if kind == "code":
            m = _PY_FENCE.match(body)
            code = (m.group(1) if m else body).strip("\n")
            if not code.strip():
                return Parsed(content=content, issues=[f"the {CODE_OPEN} block has no code in it"])
            return Parsed(content=content, calls=[ToolCall(id=f"{id_prefix}_1", name=CODE_TOOL, arguments={"code": code})])
        parsed = parse_tool_calls(f"{OPEN}{body}{CLOSE}", id_prefix)
        parsed.content = content
        return parsed

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        parts = [f"{THINK_OPEN}{content}{THINK_CLOSE}"] if content.strip() else []
        for c in calls:
            if c.name == CODE_TOOL and set(c.arguments) == {"code"}:
                parts.append(f"{CODE_OPEN}\n```python\n{c.arguments['code']}\n```\n{CODE_CLOSE}")
            else:
                parts.append(f"{OPEN}{json.dumps({'name': c.name, 'arguments': c.arguments})}{CLOSE}")
        return "\n".join(parts)

    def render_observation(self, tool: str, content: str) -> str:
        # Code results already read "Code execution result: …" (DeepEyesV2's template); other tools say who answered.
        return content if tool == CODE_TOOL else f"Result of {tool or 'the tool'}:\n{content}"

    def feedback(self, issues: list[str]) -> str:
        return "Your last message could not be used:\n- " + "\n- ".join(issues)


def _split_think(text: str) -> tuple[list[str], str]:
    """The thoughts (<think> blocks) and the text without them. An unclosed <think> runs to the next action."""
    thoughts, out, pos = [], [], 0
    low = text.lower()
    while True:
        start = low.find(THINK_OPEN, pos)
        if start < 0:
            out.append(text[pos:])
            break
        out.append(text[pos:start])
        end = low.find(THINK_CLOSE, start)
        if end < 0:
            nxt = [i for i in (low.find(t[0], start) for t in _ACTION_TAGS.values()) if i >= 0]
            stop = min(nxt) if nxt else len(text)
            thoughts.append(text[start + len(THINK_OPEN): stop].strip())
            pos = stop
        else:
            thoughts.append(text[start + len(THINK_OPEN): end].strip())
            pos = end + len(THINK_CLOSE)
    rest = "".join(out).replace(THINK_CLOSE, "")
    return [t for t in thoughts if t], rest


def _find_actions(text: str, issues: list[str]) -> list[tuple[str, int, int, str, bool]]:
    """Every action block in order: (kind, start, end, body, closed). Unbalanced tags become issues."""
    low = text.lower()
    found = []
    for kind, (op, cl) in _ACTION_TAGS.items():
        pos = 0
        while True:
            start = low.find(op, pos)
            if start < 0:
                break
            end = low.find(cl, start)
            others = [i for i in (low.find(t[0], start + len(op)) for t in _ACTION_TAGS.values()) if i >= 0]
            nxt = min(others) if others else -1
            if end < 0 or (0 <= nxt < end):
                stop = nxt if nxt >= 0 else len(text)
                if stop < len(text):  # another action interrupts it: this block was never finished
                    issues.append(f"<{kind}> is not closed with {cl} before the next action")
                found.append((kind, start, stop, text[start + len(op): stop], False))
                pos = stop
            else:
                found.append((kind, start, end + len(cl), text[start + len(op): end], True))
                pos = end + len(cl)
    found.sort(key=lambda a: a[1])
    # Closing tags with no opening tag: the model lost track of its own grammar.
    stripped = text
    for kind, start, end, body, closed in reversed(found):
        stripped = stripped[:start] + stripped[end:]
    for kind, (op, cl) in _ACTION_TAGS.items():
        if cl in stripped.lower():
            issues.append(f"found {cl} without a matching {op}")
    return found


FORMATS = {"json": JSONFormat(), "deepeyes": DeepEyesFormat()}


def get_format(name: str | None):
    """The response format by name; ValueError naming the known ones otherwise."""
    fmt = FORMATS.get(name or "json")
    if fmt is None:
        raise ValueError(f"unknown response format {name!r}; expected one of {', '.join(FORMATS)}")
    return fmt

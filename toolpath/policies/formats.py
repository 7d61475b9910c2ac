"""Response grammars: how a model that has no native tool calling writes a call, and how we read it back.

Model output is untrusted data. The parser is tolerant (fenced JSON, single quotes, trailing commas, a missing
closing tag) but never guesses silently: whatever looks like a call and cannot be read becomes an *issue*
that goes back to the model as an observation saying what was wrong. A call is never dropped without one.

Every parser here reads its input in linear time and reads a bounded amount of it: at most MAX_REPLY_CHARS of
a reply, MAX_BLOCK_CHARS of one call, MAX_CALLS calls. What lies beyond a limit is reported as an issue, never
dropped silently, and at most MAX_ISSUES issues are listed back (the rest are counted). A call's arguments
must be plain JSON data (state.plain_json): a value that is not becomes an issue too.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..state import MAX_NAME_CHARS, NotPlainJSON, ToolCall, clean_text, plain_json

OPEN, CLOSE = "<tool_call>", "</tool_call>"
# Possessive `\s*+`: with a lazy body after it, a plain `\s*` retried every split of a long whitespace run.
_FENCE = re.compile(r"```(?:json|tool_call|tool)?\s*+(.*?)```", re.S)

MAX_REPLY_CHARS = 1_000_000  # characters of one reply that are read
MAX_BLOCK_CHARS = 200_000    # characters of one call (or code block)
MAX_CALLS = 50               # calls read from one reply
MAX_ISSUES = 20              # issues listed back to the model; the others are counted
MAX_JSON_ATTEMPTS = 100      # '{"' in free text that start no JSON object before the search for bare calls stops
_DECODER = json.JSONDecoder()


@dataclass
class Parsed:
    content: str  # the text outside any tool call
    calls: list[ToolCall] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)
    answer: str | None = None  # an explicit final answer (DeepEyesV2's <answer>); None when the grammar has none


def read_reply(text: Any) -> tuple[str, list[str]]:
    """The part of a reply a parser reads (its first MAX_REPLY_CHARS, lone surrogates replaced with U+FFFD),
    and the issue that says what was not read, if anything."""
    text = text if isinstance(text, str) else ""
    if len(text) <= MAX_REPLY_CHARS:
        return clean_text(text), []
    return clean_text(text[:MAX_REPLY_CHARS]), [f"your reply is {len(text):,} characters long; only the first "
                                                f"{MAX_REPLY_CHARS:,} were read"]


def cap_issues(issues: list[str]) -> list[str]:
    """At most MAX_ISSUES issues, then one line counting the rest (a feedback message stays readable). Parsers
    put what a limit left unread first, so that it is always listed."""
    if len(issues) <= MAX_ISSUES:
        return issues
    return issues[:MAX_ISSUES] + [f"... and {len(issues) - MAX_ISSUES:,} more problems (only the first "
                                  f"{MAX_ISSUES} are listed)"]


def make_call(call_id: str, name: str, arguments: dict, label: str | None = None) -> tuple[ToolCall | None, str | None]:
    """A ToolCall, or the issue (starting with `label`, when given) that says why these can't make one: arguments
    that are not plain JSON data (NaN, 1+2j, b'…', a set, nested too deeply, too large) or a name too long."""
    head = f"{label}: " if label else ""
    if len(name) > MAX_NAME_CHARS:
        return None, f"{head}the tool name {_snippet(name, 40)!r} is longer than {MAX_NAME_CHARS} characters"
    try:
        return ToolCall(id=call_id, name=name, arguments=plain_json(arguments)), None
    except NotPlainJSON as err:
        return None, f"{head}{err}"


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
    text = " ".join(text[: 4 * n].split())  # a prefix: a snippet of a huge block costs what a short one does
    return text if len(text) <= n else text[: n - 1] + "…"


def _loads_json(text: str) -> Any:
    """json.loads, with the other ways it fails on hostile text turned into a JSONDecodeError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None
    except ValueError as err:  # an integer over Python's digit limit
        raise json.JSONDecodeError(f"unreadable number ({err})", text, 0) from None


def python_literal(fn, *args) -> Any:
    """ast.parse / ast.literal_eval of model text, without the warnings Python's compiler prints about odd
    literals (`1_000x`, an invalid escape such as a backslash before ESC): model text must not reach stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def loads_lenient(text: str) -> Any:
    """JSON, else JSON without trailing commas, else a Python literal (single quotes, True/None).

    Raises json.JSONDecodeError when none of them reads it, also for text nested too deeply or a number too long
    to read. A Python literal may hold values that are not JSON (1+2j, b'…', a set): make_call reports those.
    """
    try:
        return _loads_json(text)
    except json.JSONDecodeError as first:
        fixed = re.sub(r",\s*([}\]])", r"\1", text)
        try:
            return _loads_json(fixed)
        except json.JSONDecodeError:
            pass
        try:
            value = python_literal(ast.literal_eval, text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
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
    name = name.strip()
    label = f"tool call {idx} ({_snippet(name, 40)})"
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


def _json_objects(text: str) -> list[tuple[int, int, Any]]:
    """Every top-level JSON object in free text, as (start, end, value) (bounded: see _scan_json_objects)."""
    return _scan_json_objects(text)[0]


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` without the given spans (sorted, disjoint), in one pass."""
    parts, pos = [], 0
    for start, end in spans:
        parts.append(text[pos:start])
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


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
                               f"read): {_snippet(body)}")
            return
        fence = _FENCE.fullmatch(body)
        if fence:
            body = fence.group(1).strip()
        try:
            obj = loads_lenient(body)
        except json.JSONDecodeError as err:
            tail = "" if closed else f" and has no closing {CLOSE}"
            where = f" at column {err.colno}" if err.pos else ""
            self.issues.append(f"tool call {idx} is not valid JSON{tail} ({err.msg}{where}): {_snippet(body)}")
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
    return _cut(text, spans)


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
_PY_LANG = re.compile(r"(?:python3|python|py)(?![\w])", re.I)
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
        text, issues = read_reply(text)
        thoughts, rest = _split_think(text)
        actions = _find_actions(rest, issues)
        outside = _cut(rest, [(start, end) for _, start, end, _, _ in actions])
        content = "\n".join(t for t in thoughts + [outside.strip()] if t).strip()
        if issues:
            return Parsed(content=content, issues=cap_issues(issues))
        if not actions:
            return Parsed(content=content, issues=[self.no_action])
        if len(actions) > 1:
            kinds = ", ".join(f"<{a[0]}>" for a in actions[:5]) + (", …" if len(actions) > 5 else "")
            return Parsed(content=content, issues=[f"found {len(actions)} actions ({kinds}); write exactly one per "
                                                   f"message and wait for its result"])
        kind, _, _, body, closed = actions[0]
        if len(body) > MAX_BLOCK_CHARS:
            return Parsed(content=content, issues=[f"the <{kind}> block is {len(body):,} characters long (at most "
                                                   f"{MAX_BLOCK_CHARS:,} are read)"])
        if kind == "answer":
            if not body.strip():
                return Parsed(content=content, issues=[f"the {ANSWER_OPEN} block is empty"])
            return Parsed(content=content, answer=body.strip())
        if kind == "code":
            code = _strip_code_fence(body).strip("\n")
            if not code.strip():
                return Parsed(content=content, issues=[f"the {CODE_OPEN} block has no code in it"])
            call, problem = make_call(f"{id_prefix}_1", CODE_TOOL, {"code": code}, f"the {CODE_OPEN} block")
            return Parsed(content=content, calls=[call] if call else [], issues=[problem] if problem else [])
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


def _strip_code_fence(body: str) -> str:
    """The code inside a ```python fence (the language tag and closing fence optional), else the body itself."""
    rest = body.lstrip()
    if not rest.startswith("```"):
        return body
    rest = rest[3:].lstrip(" \t")
    lang = _PY_LANG.match(rest)
    if lang:
        rest = rest[lang.end():].lstrip(" \t")
    rest = rest.removeprefix("\n")
    tail = rest.rstrip()
    if tail.endswith("```"):
        rest = tail[:-3].removesuffix("\n")
    return rest


def _lower(text: str) -> str:
    """text.lower() with the same length, so positions found in it hold in `text` (only U+0130 grows)."""
    return text.lower() if "\u0130" not in text else text.replace("\u0130", "i").lower()


class _Finder:
    """text.find(needle, start) for starts that never decrease: an answer still ahead of the start is reused,
    so finding every block of a reply scans it once instead of once per block."""

    def __init__(self, text: str, needle: str):
        self.text, self.needle, self.hit = text, needle, -2  # -2: not searched yet; -1: no needle after here

    def find(self, start: int) -> int:
        if self.hit == -2 or 0 <= self.hit < start:
            self.hit = self.text.find(self.needle, start)
        return self.hit


def _next_action(finders: list[_Finder], start: int) -> int:
    """Where the first action tag at or after `start` opens, or -1."""
    hits = [i for i in (f.find(start) for f in finders) if i >= 0]
    return min(hits) if hits else -1


def _split_think(text: str) -> tuple[list[str], str]:
    """The thoughts (<think> blocks) and the text without them. An unclosed <think> runs to the next action."""
    thoughts, out, pos = [], [], 0
    low = _lower(text)
    opens, closes = _Finder(low, THINK_OPEN), _Finder(low, THINK_CLOSE)
    actions = [_Finder(low, op) for op, _ in _ACTION_TAGS.values()]
    while True:
        start = opens.find(pos)
        if start < 0:
            out.append(text[pos:])
            break
        out.append(text[pos:start])
        end = closes.find(start)
        if end < 0:
            nxt = _next_action(actions, start)
            stop = nxt if nxt >= 0 else len(text)
            thoughts.append(text[start + len(THINK_OPEN): stop].strip())
            pos = stop
        else:
            thoughts.append(text[start + len(THINK_OPEN): end].strip())
            pos = end + len(THINK_CLOSE)
    # Joined with a space: joined with nothing, "<answ<think>x</think>er>" would become an <answer> tag.
    rest = " ".join(out).replace(THINK_CLOSE, " ")
    return [t for t in thoughts if t], rest


_ACTION_TAG = re.compile("<(/?)(" + "|".join(_ACTION_TAGS) + ")>")


def _find_actions(text: str, issues: list[str]) -> list[tuple[str, int, int, str, bool]]:
    """Every action block in order: (kind, start, end, body, closed). Unbalanced tags become issues.

    Each opening tag starts a block. It is closed by the first closing tag of its kind, unless another action
    opens first: then it runs to that action (an issue) or, at the end of the reply, to the end (the normal
    case: generation stops at the closing tag). One pass over the tags, found by one regex scan.
    """
    low = _lower(text)
    opens: list[tuple[int, str]] = []
    closes: dict[str, list[int]] = {kind: [] for kind in _ACTION_TAGS}
    for m in _ACTION_TAG.finditer(low):
        closes[m.group(2)].append(m.start()) if m.group(1) else opens.append((m.start(), m.group(2)))
    read_to = len(text)
    if len(opens) > MAX_CALLS:  # one action is allowed: reading thousands only to say so would be wasted work
        issues.append(f"found {len(opens):,} actions; only the first {MAX_CALLS} were read. Write exactly one "
                      "per message and wait for its result")
        read_to, opens = opens[MAX_CALLS][0], opens[:MAX_CALLS]
        closes = {kind: [pos for pos in ends if pos < read_to] for kind, ends in closes.items()}
    found, unclosed, seen = [], set(), {kind: 0 for kind in _ACTION_TAGS}
    for i, (start, kind) in enumerate(opens):
        op, cl = _ACTION_TAGS[kind]
        nxt = opens[i + 1][0] if i + 1 < len(opens) else read_to
        ends = closes[kind]
        while seen[kind] < len(ends) and ends[seen[kind]] < start:
            seen[kind] += 1
        end = ends[seen[kind]] if seen[kind] < len(ends) else -1
        if end < 0 or nxt < end:
            if nxt < len(text):  # another action interrupts it: this block was never finished
                unclosed.add(kind)
            found.append((kind, start, nxt, text[start + len(op): nxt], False))
        else:
            found.append((kind, start, end + len(cl), text[start + len(op): end], True))
    starts = [b[1] for b in found]
    for kind, (op, cl) in _ACTION_TAGS.items():
        if kind in unclosed:
            issues.append(f"<{kind}> is not closed with {cl} before the next action")
    for kind, (op, cl) in _ACTION_TAGS.items():
        # A closing tag outside every block has no opening tag: the model lost track of its own grammar.
        if any(not _inside(found, starts, pos) for pos in closes[kind]):
            issues.append(f"found {cl} without a matching {op}")
    return found


def _inside(blocks: list[tuple], starts: list[int], pos: int) -> bool:
    """Whether `pos` lies inside one of the blocks (sorted by start, disjoint)."""
    i = bisect.bisect_right(starts, pos) - 1
    return i >= 0 and pos < blocks[i][2]


FORMATS = {"json": JSONFormat(), "deepeyes": DeepEyesFormat()}


def get_format(name: str | None):
    """The response format by name; ValueError naming the known ones otherwise."""
    fmt = FORMATS.get(name or "json")
    if fmt is None:
        raise ValueError(f"unknown response format {name!r}; expected one of {', '.join(FORMATS)}")
    return fmt

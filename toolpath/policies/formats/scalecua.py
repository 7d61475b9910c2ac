"""ScaleCUA's response grammar: `<think>…</think><operation>…</operation><action>…</action>`.

    grounding   <action>click(x=512, y=300)</action>            (a bare "(512, 300)" is read as a click too)
    direct      <operation>Click the Save button</operation><action>click(x=512, y=300)</action>
    reasoned    <think>…</think> then the two above

The action block holds one or more calls, one per line, in Python call syntax: `click(x=10, y=20)`,
`hotkey('ctrl', 'c')`, `write(message="a, (b) 'c'")`, `swipe(from_coord=[1, 2], to_coord=[3, 4])`. They are
read with Python's `ast` (so commas, quotes and brackets inside strings are safe, and a call may span lines),
never with a regex. ScaleCUA's own parser drops the whole step when one line is malformed; here a malformed
line becomes an issue the model is told about, and the valid lines still run.

Positional arguments take the action's parameters in schema order (`click(10, 20)` is x=10, y=20); a call to
`hotkey` with several positional keys collects them into `keys`. Argument values must be literals: a call
is data from a model, not code, and nothing in it is ever evaluated. Values must also be plain JSON data
(no 1+2j, b'…', sets or NaN: state.plain_json), and the block is read up to the limits of common.py
(MAX_BLOCK_CHARS of it, MAX_CALLS calls), the rest reported as an issue.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ...coords import MAX_PIXELS, MIN_PIXELS, CoordinateSpace
from ...state import ToolCall
from .common import MAX_BLOCK_CHARS, MAX_CALLS, Parsed, cap_issues, make_call, python_literal, read_reply, snippet

MODES = ("grounding", "direct", "reasoned")
_TAG = {t: (re.compile(rf"<{t}>", re.I), re.compile(rf"</{t}>", re.I)) for t in ("think", "operation", "action")}
_ANY_OPEN = re.compile(r"<(think|operation|action)>", re.I)
_BARE_POINT = re.compile(r"^\s*[\(\[]\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*[\)\]]\s*$")
_PREFIXES = ("pyautogui.", "computer.", "mobile.", "browser.")


def _block(text: str, tag: str) -> str | None:
    """The body of the first <tag> block; an unclosed one runs to the next tag or the end (generation stops
    at </action>, so a missing closing tag at the end is the normal case)."""
    op, cl = _TAG[tag]
    m = op.search(text)
    if not m:
        return None
    end = cl.search(text, m.end())
    nxt = _ANY_OPEN.search(text, m.end())
    if end and (not nxt or end.start() <= nxt.start()):
        return text[m.end():end.start()]
    return text[m.end():nxt.start() if nxt else len(text)]


def _depth_change(line: str) -> int:
    """Open minus closed brackets outside string literals (so a call spanning lines can be collected)."""
    depth, quote, i = 0, "", 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch in "\"'":
            quote = line[i:i + 3] if line[i:i + 3] in ('"""', "'''") else ch
            i += len(quote) - 1
        elif ch == "#":
            break
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        i += 1
    return depth


def split_calls(block: str) -> list[tuple[int, str]]:
    """The statements of an action block as (first line number, source); brackets may span lines."""
    out, buf, start, depth = [], [], 0, 0
    for n, line in enumerate(block.splitlines(), 1):
        if not buf:
            if not line.strip():
                continue
            start = n
        buf.append(line)
        depth += _depth_change(line)
        if depth <= 0:
            out.append((start, "\n".join(buf).strip()))
            buf, depth = [], 0
    if buf:
        out.append((start, "\n".join(buf).strip()))
    return out


def _readable_part(block: str) -> tuple[str, int]:
    """The part of an action block that is read (at most MAX_BLOCK_CHARS, cut at a line break so that no call
    is read half) and how many characters were left unread."""
    if len(block) <= MAX_BLOCK_CHARS:
        return block, 0
    cut = block.rfind("\n", 0, MAX_BLOCK_CHARS + 1)
    cut = cut if cut > 0 else MAX_BLOCK_CHARS
    return block[:cut], len(block) - cut


def _dotted_name(node: ast.AST) -> str | None:
    """`click`, `pyautogui.click`: the name a call is made through, or None when it is not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):  # a loop, not ast.unparse: a long chain must not exhaust the stack
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


@dataclass
class ScaleCUAFormat:
    """One run's grammar: its mode, platform and coordinate convention (set by the computer-use agent)."""

    mode: str = "direct"
    platform: str = "web"
    convention: str = "absolute"
    min_pixels: int = MIN_PIXELS
    max_pixels: int = MAX_PIXELS
    name: str = "scalecua"
    max_steps: int | None = None
    native_tools: bool = False
    text_is_answer: bool = False
    schemas: list | None = None  # the platform's action schemas: the order of positional arguments

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; expected one of {', '.join(MODES)}")
        CoordinateSpace(self.convention, 100, 100)  # fails early, naming the conventions, if unknown

    @property
    def stop(self) -> tuple[str, ...]:
        return ("</action>",)

    @property
    def no_action(self) -> str:
        return "Your reply had no <action>…</action> block. " + self.shape()

    def space(self, width: int, height: int) -> CoordinateSpace:
        """The coordinate space of a screenshot of this size, in the run's convention."""
        return CoordinateSpace(self.convention, width, height, self.min_pixels, self.max_pixels)

    def shape(self) -> str:
        if self.mode == "grounding":
            return ("Reply with <action>click(x=…, y=…)</action> for the element, or "
                    "<action>terminate(status=\"failure\")</action> if it is not on the screen.")
        head = "<think>your reasoning</think>\n" if self.mode == "reasoned" else ""
        return (f"Reply as {head}<operation>what you do next, in one sentence</operation>\n"
                "<action>one or more calls, one per line</action>")

    # ---- prompt ---------------------------------------------------------------------------------------

    def guide(self, schemas: list[dict]) -> str:
        lines = ["Actions you can use (Python call syntax):"]
        for s in schemas:
            props = s.get("parameters", {}).get("properties", {})
            required = set(s.get("parameters", {}).get("required", []))
            args = []
            for k, v in props.items():
                args.append(k if k in required or "default" not in v else f"{k}={v['default']!r}")
            lines.append(f"- {s['name']}({', '.join(args)}): {s.get('description', '')}")
        lines.append(self.shape())
        return "\n".join(lines)

    def demonstration(self, schemas: list[dict]) -> list[dict]:
        return []

    # ---- parse ----------------------------------------------------------------------------------------

    def parse(self, text: str, id_prefix: str = "call", schemas: list[dict] | None = None) -> Parsed:
        text, issues = read_reply(text)
        think = _block(text, "think")
        operation = _block(text, "operation")
        action = _block(text, "action")
        if action is None:
            bare = _BARE_POINT.match(text.strip()) if self.mode == "grounding" else None
            if bare:
                action = f"click(x={bare.group(1)}, y={bare.group(2)})"
            else:
                content = (operation or think or text).strip()
                return Parsed(content=content, issues=issues + [self.no_action])
        action, unread = _readable_part(action)
        if unread:
            issues.append(f"the <action> block is {len(action) + unread:,} characters long; only its first "
                          f"{len(action):,} (at most {MAX_BLOCK_CHARS:,}, up to a line break) were read")
        order = {s["name"]: list(s.get("parameters", {}).get("properties", {}))
                 for s in (schemas or self.schemas or [])}
        calls: list[ToolCall] = []
        statements = split_calls(action)
        if len(statements) > MAX_CALLS:
            issues.append(f"the <action> block has {len(statements):,} calls; only the first {MAX_CALLS} were read "
                          f"and the other {len(statements) - MAX_CALLS:,} were not run")
        for lineno, src in statements[:MAX_CALLS]:
            bare = _BARE_POINT.match(src)
            if bare:
                src = f"click(x={bare.group(1)}, y={bare.group(2)})"
            call, problem = self._call(src, order, f"{id_prefix}_{len(calls) + 1}")
            if problem:
                issues.append(f"action line {lineno} `{snippet(src, 60)}`: {problem}")
            else:
                calls.append(call)
        if not calls and not issues:
            issues.append("the <action> block is empty. " + self.shape())
        content = (operation or "").strip() or (think or "").strip()
        return Parsed(content=content, calls=calls, issues=cap_issues(issues))

    def _call(self, src: str, order: dict[str, list[str]], call_id: str) -> tuple[ToolCall | None, str | None]:
        try:
            tree = python_literal(ast.parse, src, "<action>", "eval")
        except SyntaxError as err:
            return None, f"not a valid call ({err.msg})"
        except (MemoryError, RecursionError):  # Python's parser gives up on very deep nesting this way
            return None, "not a valid call (it is nested too deeply to read)"
        node = tree.body
        if not isinstance(node, ast.Call):
            return None, "expected a call such as click(x=100, y=200)"
        name = _dotted_name(node.func)
        if name is None:
            return None, "the action must be a name, as in click(x=100, y=200)"
        for p in _PREFIXES:
            name = name.removeprefix(p)
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            return None, f"{snippet(name, 40)!r} is not an action name"
        if order and name not in order:
            return None, f"unknown action {snippet(name, 40)!r}; available: {', '.join(order)}"
        try:
            args = [python_literal(ast.literal_eval, a) for a in node.args]
            kwargs = {k.arg: python_literal(ast.literal_eval, k.value) for k in node.keywords if k.arg}
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None, "argument values must be literals (numbers, strings, lists)"
        if any(k.arg is None for k in node.keywords):
            return None, "**arguments are not allowed"
        params = order.get(name, [])
        if args:
            if name == "hotkey" or (len(params) == 1 and len(args) > 1 and params[0] == "keys"):
                args = [args[0] if len(args) == 1 and isinstance(args[0], list) else args]
            if len(args) > len(params):
                return None, (f"{name} takes at most {len(params)} positional argument(s) ({', '.join(params)}), "
                              f"got {len(args)}")
            for p, v in zip(params, args):
                if p in kwargs:
                    return None, f"{name} got {p} twice"
                kwargs[p] = v
        return make_call(call_id, name, kwargs)

    # ---- history --------------------------------------------------------------------------------------

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        body = "\n".join(f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in calls)
        op = f"<operation>{content}</operation>\n" if content and self.mode != "grounding" else ""
        return f"{op}<action>{body}</action>"

    def render_observation(self, tool: str, content: str) -> str:
        return f"{tool}: {content}"

    def feedback(self, issues: list[str]) -> str:
        return "Some of your action lines could not be used (the others ran):\n- " + "\n- ".join(issues)

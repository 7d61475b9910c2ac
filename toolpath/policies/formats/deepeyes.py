"""DeepEyesV2's grammar: `<think>…</think>` then one `<code>`, `<tool_call>` or `<answer>` action per turn."""

from __future__ import annotations

import bisect
import json
import re

from ...state import ToolCall
from .common import MAX_BLOCK_CHARS, MAX_CALLS, Parsed, cap_issues, cut, make_call, read_reply
from .json import CLOSE, OPEN, parse_tool_calls

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
        outside = cut(rest, [(start, end) for _, start, end, _, _ in actions])
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
    for kind, (_op, cl) in _ACTION_TAGS.items():
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

"""Reading a DAG-MATH trajectory: the official format, lenient about layout, strict about shape.

Accepted, the three spellings the official repository uses for one trajectory:

    [step, ...]                              a bare list of steps
    {"steps": [step, ...]}                   the object its generation prompt asks for
    [{"problem_id": ..., "steps": [...]}]    a file of its formatted set: one problem with its steps

A step is an object with `step_id` (an integer), `direct_dependent_steps` (null for a fact taken from the problem,
else a list of step ids; an empty list is read as null, as the official tools write it), its statement in
`content` (the set's files say `node`, the generation prompt `text`) and, optionally, its reasoning in `edge`
(or `thinking`).

Whitespace around the JSON and one Markdown code fence (```json ... ```) are ignored, and so is LaTeX whose backslash
JSON read as an escape (`\boxed` written with one backslash is a backspace and "oxed"); anything else that is not one
JSON value is a DagSyntaxError naming the line and column. A step of the wrong shape does not stop the reading: it
is kept as far as it can be read and its problems are listed, so rules.py names them beside every other violation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

MAX_CHARS = 2_000_000  # a trajectory's text; a longer one is refused before it is parsed
MAX_STEPS = 10_000

CONTENT_KEYS = ("content", "node", "text")
REASONING_KEYS = ("edge", "thinking")
PARENTS_KEY = "direct_dependent_steps"

_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(?P<body>.*)\n[ \t]*```\Z", re.S)


class DagSyntaxError(ValueError):
    """The text is not one trajectory in the format: not JSON (with its line and column), or JSON of another shape."""


@dataclass(frozen=True)
class Step:
    position: int  # 1-based place in the list: how a message names a step whose id cannot be read
    id: int | None  # None: step_id missing or not an integer (a problem is listed)
    parents: tuple[int, ...] | None  # None: a fact from the problem
    content: str = ""
    reasoning: str = ""

    @property
    def name(self) -> str:
        return f"step {self.id}" if self.id is not None else f"the step at position {self.position}"


@dataclass
class Trajectory:
    steps: list[Step]
    problems: list[tuple[int, str]] = field(default_factory=list)  # (position, what is wrong with that step's shape)


def _strip_layout(text: str) -> str:
    text = text.strip()
    fenced = _FENCE.match(text)
    return fenced.group("body").strip() if fenced else text


def _parse_json(text: str):
    if len(text) > MAX_CHARS:
        raise DagSyntaxError(f"{len(text)} characters: more than the {MAX_CHARS} a trajectory may have")
    body = _strip_layout(text)
    if not body:
        raise DagSyntaxError("empty: expected a JSON list of steps")
    try:
        return json.loads(body)
    except json.JSONDecodeError as err:
        shift = text[: text.find(body)].count("\n")  # the fence's and the blank lines' before the JSON
        raise DagSyntaxError(f"not JSON at line {err.lineno + shift}, column {err.colno}: {err.msg}") from None
    except RecursionError:
        raise DagSyntaxError("not JSON that can be read: nested too deeply") from None


def _step_list(data) -> list:
    """The list of steps in any of the accepted spellings, or a DagSyntaxError saying what was found instead."""
    if isinstance(data, dict):
        if "steps" not in data:
            raise DagSyntaxError(f"a JSON object without \"steps\" (keys: {', '.join(sorted(map(str, data))[:8])}); "
                                 "expected a list of steps or {\"steps\": [...]}")
        data = data["steps"]
    elif isinstance(data, list) and data and all(isinstance(x, dict) and "steps" in x for x in data):
        if len(data) > 1:
            raise DagSyntaxError(f"{len(data)} problems, each with its steps: one trajectory was expected")
        data = data[0]["steps"]
    if not isinstance(data, list):
        raise DagSyntaxError(f"the steps are a JSON {type(data).__name__}, not a list")
    if len(data) > MAX_STEPS:
        raise DagSyntaxError(f"{len(data)} steps: more than the {MAX_STEPS} a trajectory may have")
    return data


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# LaTeX written into JSON with one backslash: JSON reads \boxed as a backspace and "oxed", \frac as a form feed
# and "rac", \times as a tab and "imes". Backspace and form feed have no place in a statement, so they are always
# the command's letter; a tab or carriage return only before the rest of a command models write.
_MANGLED = re.compile(r"[\x08\x0c]|[\t\r](?=(?:imes|ext|heta|an|ight|ho)\b)")
_LETTER = {"\x08": "\\b", "\x0c": "\\f", "\t": "\\t", "\r": "\\r"}


def _text(item: dict, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` the step has, as text (LaTeX that JSON escapes mangled mended); None when it has none
    of them or it is not a string."""
    for key in keys:
        if key in item:
            value = item[key]
            return _MANGLED.sub(lambda m: _LETTER[m.group()], value) if isinstance(value, str) else None
    return None


def _read_step(position: int, item, problems: list[tuple[int, str]]) -> Step:
    def problem(what: str) -> None:
        problems.append((position, what))

    if not isinstance(item, dict):
        problem(f"is a JSON {type(item).__name__}, not an object with step_id, {PARENTS_KEY} and content")
        return Step(position, None, None)
    sid = item.get("step_id")
    if not _is_int(sid):
        problem("has no step_id" if sid is None else f"has step_id {json.dumps(sid)[:40]}, not an integer")
        sid = None
    if PARENTS_KEY not in item:
        problem(f"has no {PARENTS_KEY} (null for a fact from the problem)")
    parents = item.get(PARENTS_KEY)
    if parents is not None and not (isinstance(parents, list) and all(_is_int(p) for p in parents)):
        problem(f"has {PARENTS_KEY} {json.dumps(parents)[:60]}: expected null or a list of step ids")
        parents = [p for p in parents if _is_int(p)] if isinstance(parents, list) else None
    content = _text(item, CONTENT_KEYS)
    if content is None:
        problem(f"has no statement as text ({', '.join(CONTENT_KEYS)})")
        content = ""
    reasoning = _text(item, REASONING_KEYS) or ""
    return Step(position, sid, tuple(parents) if parents else None, content, reasoning)


def read_trajectory(text: str) -> Trajectory:
    """The trajectory in `text`; a DagSyntaxError when the text is not one."""
    return from_data(_parse_json(text))


def from_data(data) -> Trajectory:
    """The trajectory in already-parsed JSON (a line of the formatted set), or a DagSyntaxError."""
    problems: list[tuple[int, str]] = []
    return Trajectory([_read_step(i, item, problems) for i, item in enumerate(_step_list(data), 1)], problems)

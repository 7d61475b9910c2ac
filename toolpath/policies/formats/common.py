"""What every response grammar shares: the limits on what is read, the parsed result, and the readers of values.

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
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ...state import MAX_NAME_CHARS, NotPlainJSON, ToolCall, clean_text, plain_json

MAX_REPLY_CHARS = 1_000_000  # characters of one reply that are read
MAX_BLOCK_CHARS = 200_000    # characters of one call (or code block)
MAX_CALLS = 50               # calls read from one reply
MAX_ISSUES = 20              # issues listed back to the model; the others are counted


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
        return None, f"{head}the tool name {snippet(name, 40)!r} is longer than {MAX_NAME_CHARS} characters"
    try:
        return ToolCall(id=call_id, name=name, arguments=plain_json(arguments)), None
    except NotPlainJSON as err:
        return None, f"{head}{err}"


def snippet(text: str, n: int = 80) -> str:
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


def cut(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` without the given spans (sorted, disjoint), in one pass."""
    parts, pos = [], 0
    for start, end in spans:
        parts.append(text[pos:start])
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


@runtime_checkable
class ResponseFormat(Protocol):
    """Everything a text-generating policy needs to speak one grammar: the prompt section that teaches it, an
    optional worked example, the stop sequences, the parser, and how earlier turns (the model's own calls, tool
    results) are written back into the conversation. The react agent picks one per run by its registry name
    (`agent: {name: react, params: {format: deepeyes}}`); every policy that produces text uses it."""

    name: str
    stop: tuple[str, ...]
    max_steps: int | None  # a turn limit of the grammar's own (applies unless the spec sets max_steps)
    native_tools: bool  # a server with function calling may get the tools natively instead of this grammar
    text_is_answer: bool  # plain text with no call is the final answer
    no_action: str  # what the model is told when its reply holds no action

    def guide(self, schemas: list[dict]) -> str: ...

    def demonstration(self, schemas: list[dict]) -> list[dict]: ...

    def parse(self, text: str, id_prefix: str = "call") -> Parsed: ...

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str: ...

    def render_observation(self, tool: str, content: str) -> str: ...

    def feedback(self, issues: list[str]) -> str: ...

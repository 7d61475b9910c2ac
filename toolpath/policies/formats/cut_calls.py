"""A JSON tool call that the token limit cut off, kept when nothing the tool reads was cut.

A small model often copies a tool's result into its next call (a transcript's per-word table as an extra
argument of final_answer) until the reply reaches max_new_tokens. The call's JSON is then unfinished, so no
parser reads it, although every argument the tool takes was written in full before the cut. Such a call is
read with its complete arguments only when the argument being written at the cut is not one of the tool's
parameters (nothing the tool would have read is lost) and every required argument is there. Anything else
stays what it was: an unreadable call and an issue that goes back to the model.

Only the last call of a reply can be cut, and only when the policy knows the reply ended at its token limit.
The reply itself is kept as produced; the step record shows it beside the call that ran.
"""

from __future__ import annotations

import json
import re

_CALL_START = re.compile(r'\{\s*+"name"\s*+:')
_KEY = re.compile(r'\s*+"((?:[^"\\]|\\.)*)("?)')


def _argument_ends(body: str) -> tuple[list[int], bool]:
    """Where each complete member of the call's inner object ends (the comma after it), and whether the body
    ends inside that object, unfinished (a cut), reading strings and brackets as JSON does."""
    stack, ends, in_string, escaped = [], [], False, False
    for i, ch in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]":
            if not stack:
                return ends, False
            stack.pop()
            if not stack:
                return ends, False  # the object closed: not a cut call
            if len(stack) == 1:
                ends = []  # the inner object closed: a cut after it is not inside the arguments
        elif ch == "," and stack == ["{", "{"]:
            ends.append(i)
    return ends, stack[:2] == ["{", "{"]


def _cut_argument(rest: str, params: dict) -> bool:
    """Whether the member being written after the last complete one could be one of the tool's parameters."""
    m = _KEY.match(rest)
    if m is None:
        return False  # nothing but whitespace after the comma
    key, closed = m.group(1), bool(m.group(2))
    return key in params if closed else any(p.startswith(key) for p in params)


def recover_cut_call(raw: str, schemas: list[dict]) -> tuple[int, dict] | None:
    """(where the cut call starts in `raw`, the call as {"name", "arguments"}) for a reply whose last call
    the token limit cut after its last argument the tool takes; None when there is no such call."""
    starts = [m.start() for m in _CALL_START.finditer(raw)]
    if not starts:
        return None
    start = starts[-1]
    body = raw[start:]
    ends, cut = _argument_ends(body)
    if not cut or not ends:
        return None
    try:
        call = json.loads(body[:ends[-1]] + "}}")
    except (json.JSONDecodeError, RecursionError, ValueError):
        return None
    if not (isinstance(call, dict) and len(call) == 2 and isinstance(call.get("name"), str)):
        return None
    args = call.get("arguments", call.get("parameters"))  # the second is some native families' key
    if not isinstance(args, dict):
        return None
    schema = next((s for s in schemas if s.get("name") == call["name"]), None)
    if schema is None:
        return None
    params = (schema.get("parameters") or {}).get("properties") or {}
    required = (schema.get("parameters") or {}).get("required") or []
    if _cut_argument(body[ends[-1] + 1:], params) or any(r not in args for r in required):
        return None
    return start, call


def with_cut_call(raw: str, schemas: list[dict], open_tag: str, close_tag: str) -> str | None:
    """`raw` with its cut last call closed after its last complete argument (and its tag closed), for the
    format's parser to read; None when the reply has no call that may be kept so."""
    found = recover_cut_call(raw, schemas)
    if found is None:
        return None
    start, call = found
    tagged = raw.rfind(open_tag, 0, start) > raw.rfind(close_tag, 0, start)
    return raw[:start] + json.dumps(call, ensure_ascii=False) + (close_tag if tagged else "")

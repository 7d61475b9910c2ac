"""The data that flows through an agent graph: messages, tool calls, observations, artifact references.

`AgentState` is what LangGraph checkpoints after every node. It is kept lean on purpose: it holds counters,
the pending tool calls and the outcome, while the transcript (every message, every observation) is appended
to the run store as it happens and re-read from there on resume. A checkpoint therefore costs the same at
step 1,000 as at step 1, and images or files are never inside it, only `ArtifactRef`s in the transcript.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, Field, field_validator

Role = Literal["system", "user", "assistant", "tool"]
# "interrupted" is never stored: the store shows a running run whose process is gone that way. "abandoned" is a
# run of an eval that no sample claims (its eval was killed and resumed with another run for that sample).
Status = Literal["running", "interrupted", "finished", "failed", "budget_exhausted", "looping", "abandoned"]
TERMINAL: frozenset[str] = frozenset({"finished", "failed", "budget_exhausted", "looping", "abandoned"})


class ArtifactRef(BaseModel):
    """A file kept in the run store's content-addressed folder."""

    sha256: str
    path: str
    mime: str = "application/octet-stream"
    name: str = ""
    size: int = 0


# ---- plain JSON data --------------------------------------------------------------------------------------
# A tool call's arguments come from model output (untrusted) and are checkpointed, stored and shown by the
# viewer. Each of those needs plain JSON: a Python literal such as 1+2j, b'x' or {'a', 'b'} cannot be
# serialized, NaN is not valid JSON, a lone surrogate cannot be encoded as UTF-8, and very deep or very large
# values exhaust the stack or the memory of whatever reads them next. So ToolCall admits nothing else.

MAX_ARGUMENT_DEPTH = 32         # levels of lists and objects, the arguments object itself the first
MAX_ARGUMENT_ITEMS = 10_000     # values, counted through every level
MAX_ARGUMENT_CHARS = 1_000_000  # characters of every key and string together
MAX_NAME_CHARS = 200            # a tool's name
INT_LIMIT = 2**63               # integers must fit in 64 bits (SQLite's and most JSON readers' integers)

_SURROGATE = re.compile("[\ud800-\udfff]")
_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


class NotPlainJSON(ValueError):
    """A value that JSON cannot carry as it is; the message names where it is and what it was."""


def clean_text(text: str) -> str:
    """`text` with every lone surrogate (unencodable in UTF-8) replaced by U+FFFD; a valid pair is joined."""
    if not _SURROGATE.search(text):
        return text
    # Replaced by a regex, not by the codec's "replace" handler: that one costs a call per surrogate.
    text = _LONE_SURROGATE.sub("\ufffd", text)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def plain_json(value: Any, where: str = "arguments") -> Any:
    """A copy of `value` as plain JSON data (dict with string keys, list, str, int, finite float, bool, None).

    Tuples become lists and strings are cleaned with `clean_text`; anything else that JSON cannot hold as it
    is, or a value over the depth, item or character limits, raises NotPlainJSON naming its place.
    """
    budget = {"items": MAX_ARGUMENT_ITEMS, "chars": MAX_ARGUMENT_CHARS}
    return _plain(value, where, 0, budget)


def _plain(value: Any, where: str, depth: int, budget: dict[str, int]) -> Any:
    budget["items"] -= 1
    if budget["items"] < 0:
        raise NotPlainJSON(f"{where}: too many values (at most {MAX_ARGUMENT_ITEMS} in one call)")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _plain_str(value, where, budget)
    if isinstance(value, int):
        if not -INT_LIMIT <= value < INT_LIMIT:
            raise NotPlainJSON(f"{where}: the integer {_short(value)} does not fit in 64 bits")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotPlainJSON(f"{where}: {value!r} is not a finite number (JSON has no NaN or Infinity)")
        return float(value)
    if isinstance(value, (dict, list, tuple)):
        if depth >= MAX_ARGUMENT_DEPTH:
            raise NotPlainJSON(f"{where}: nested more than {MAX_ARGUMENT_DEPTH} levels deep")
        if isinstance(value, dict):
            return {_plain_key(k, where, budget): _plain(v, _child(where, k), depth + 1, budget)
                    for k, v in value.items()}
        return [_plain(v, f"{where}[{i}]", depth + 1, budget) for i, v in enumerate(value)]
    raise NotPlainJSON(f"{where}: {_kind(value)} {_short(value)} is not JSON data (use a string, a number, "
                       "true/false, null, a list or an object)")


def _plain_str(text: str, where: str, budget: dict[str, int]) -> str:
    budget["chars"] -= len(text)
    if budget["chars"] < 0:
        raise NotPlainJSON(f"{where}: too much text (at most {MAX_ARGUMENT_CHARS:,} characters in one call)")
    return clean_text(str(text))


def _plain_key(key: Any, where: str, budget: dict[str, int]) -> str:
    if not isinstance(key, str):
        raise NotPlainJSON(f"{where}: the key {_short(key)} is {_kind(key)}; object keys must be strings")
    return _plain_str(key, where, budget)


def _child(where: str, key: str) -> str:
    return f"{where}.{key}" if key.isidentifier() else f"{where}[{_short(key)}]"


def _kind(value: Any) -> str:
    names = {complex: "a complex number", bytes: "bytes", bytearray: "bytes", set: "a set", frozenset: "a set",
             int: "an integer", float: "a number", type(...): "an ellipsis"}
    return next((n for t, n in names.items() if isinstance(value, t)), f"a value of type {type(value).__name__}")


def _short(value: Any, n: int = 40) -> str:
    try:
        text = repr(value) if not isinstance(value, int) or abs(value) < 10**40 else f"{str(value)[:12]}…"
    except (ValueError, RecursionError):  # an object whose repr is too deep or too long to produce
        text = f"<{type(value).__name__}>"
    text = clean_text(text)
    return text if len(text) <= n else text[: n - 1] + "…"


class ToolCall(BaseModel):
    """One call a policy asked for. Its fields are plain JSON data (see plain_json), so it can always be
    checkpointed, stored and shown; constructing one from anything else raises a ValueError saying why."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", "name", mode="before")
    @classmethod
    def _plain_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            if len(value) > MAX_NAME_CHARS:
                raise NotPlainJSON(f"{_short(value)} is longer than {MAX_NAME_CHARS} characters")
            return clean_text(value)
        return value

    @field_validator("arguments", mode="before")
    @classmethod
    def _plain_arguments(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise NotPlainJSON(f"arguments must be an object, got {_kind(value)}")
        return plain_json(value)


class Observation(BaseModel):
    """What a tool call (or a failed attempt at one) gave back, as the agent sees it."""

    call_id: str
    tool: str
    content: str
    error: bool = False
    artifacts: list[ArtifactRef] = Field(default_factory=list)

    @field_validator("content", mode="after")
    @classmethod
    def _clean(cls, value: str) -> str:
        return clean_text(value)


class Message(BaseModel):
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    images: list[ArtifactRef] = Field(default_factory=list)
    audio: list[ArtifactRef] = Field(default_factory=list)  # the task's audio, for the viewer's player
    graphs: list[ArtifactRef] = Field(default_factory=list)  # the task's molecules (MOL blocks), for the viewer

    @field_validator("content", mode="after")
    @classmethod
    def _clean(cls, value: str) -> str:
        return clean_text(value)  # model text is stored as UTF-8: a lone surrogate would fail the write


class AgentState(TypedDict, total=False):
    """Checkpointed graph state. Plain JSON values only, so any checkpointer can store it cheaply."""

    seq: int  # node executions so far; the key of each step row in the store
    steps: int  # policy calls so far (the budget unit)
    pending: list[dict]  # ToolCall dicts the last policy step asked for
    status: str
    answer: str | None
    error: str | None
    tokens_in: int
    tokens_out: int
    seconds: float  # time spent inside nodes, summed over resumes
    last_call: str | None  # signature of the last tool call, for the loop guard
    repeats: int


def initial_state() -> AgentState:
    return AgentState(seq=0, steps=0, pending=[], status="running", answer=None, error=None,
                      tokens_in=0, tokens_out=0, seconds=0.0, last_call=None, repeats=0)


@dataclass
class StepRecord:
    """One stored step as every reader sees it (`runs show`, the viewer, the eval runner): the columns of its
    row and the payload the node recorded (nodes.Runtime.record), decoded here once.

    The payload's known keys have properties; what else a node kept (an embodied plan, a subtask's search
    tree) stays in `payload`. Contents are left as stored, plain data: a reader of an older store, or of a
    model's hostile output, shows what is there rather than failing on it."""

    seq: int
    node: str
    started: float = 0.0
    seconds: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    payload: dict[str, Any] | str | None = None  # the JSON object the node stored, or the text when it is not one

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StepRecord:
        """From a steps row (Store.steps or a SELECT), its payload decoded from JSON text if it still is text."""
        payload = row.get("payload")
        if isinstance(payload, (str, bytes)):
            try:
                payload = json.loads(payload)
            except (ValueError, RecursionError):
                pass  # kept as text: a bad row is still evidence
        return cls(seq=row["seq"], node=row["node"], started=row.get("started", 0.0), seconds=row.get("seconds", 0.0),
                   tokens_in=row.get("tokens_in", 0), tokens_out=row.get("tokens_out", 0), payload=payload)

    def _get(self, key: str, default: Any = None) -> Any:
        return self.payload.get(key, default) if isinstance(self.payload, dict) else default

    def has(self, key: str) -> bool:
        """Whether the node recorded `key` (a final state of None is still one recorded)."""
        return isinstance(self.payload, dict) and key in self.payload

    @property
    def messages(self) -> list[dict]:
        """The messages the step added to the transcript (Message.model_dump), as stored."""
        return self._get("messages") or []

    @property
    def raw(self) -> str | None:
        """A policy step's model output exactly as produced."""
        return self._get("raw")

    @property
    def prefill_tokens(self) -> int | None:
        """Of a policy step's tokens_in, those the model read afresh; None when its policy did not say."""
        return self._get("prefill_tokens")

    @property
    def reused_tokens(self) -> int | None:
        """Of a policy step's tokens_in, those whose KV state an earlier call left (prefix reuse), or None."""
        return self._get("reused_tokens")

    @property
    def issues(self) -> list[str]:
        """What could not be read of a policy step's output."""
        return self._get("issues") or []

    @property
    def error(self) -> str | None:
        return self._get("error")

    @property
    def observations(self) -> list[dict]:
        """A tool step's Observations (Observation.model_dump), as stored."""
        return self._get("observations") or []

    @property
    def final_state(self) -> Any:
        """What an environment-scored episode recorded of its world as it ended (a finish step), or None."""
        return self._get("final_state")

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "node": self.node, "started": self.started, "seconds": self.seconds,
                "tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "payload": self.payload}

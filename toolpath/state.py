"""The data that flows through an agent graph: messages, tool calls, observations, artifact references.

`AgentState` is what LangGraph checkpoints after every node. It is kept lean on purpose: it holds counters,
the pending tool calls and the outcome, while the transcript (every message, every observation) is appended
to the run store as it happens and re-read from there on resume. A checkpoint therefore costs the same at
step 1,000 as at step 1, and images or files are never inside it, only `ArtifactRef`s in the transcript.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant", "tool"]
# "interrupted" is never stored: the store shows a running run whose process is gone that way.
Status = Literal["running", "interrupted", "finished", "failed", "budget_exhausted", "looping"]
TERMINAL: frozenset[str] = frozenset({"finished", "failed", "budget_exhausted", "looping"})


class ArtifactRef(BaseModel):
    """A file kept in the run store's content-addressed folder."""

    sha256: str
    path: str
    mime: str = "application/octet-stream"
    name: str = ""
    size: int = 0


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Observation(BaseModel):
    """What a tool call (or a failed attempt at one) gave back, as the agent sees it."""

    call_id: str
    tool: str
    content: str
    error: bool = False
    artifacts: list[ArtifactRef] = Field(default_factory=list)


class Message(BaseModel):
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    images: list[ArtifactRef] = Field(default_factory=list)


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

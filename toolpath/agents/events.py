"""What an episode tells its caller while it runs (run_episode's `on_event`): one dataclass per kind of event.

Agents and the episode build these; `Runtime.emit` hands the caller each as a plain mapping, `{"type": KIND,
field: value, ...}` with unset (None) fields left out. That mapping is what `toolpath run`'s progress lines,
`toolpath eval` and a capability relaying its nested run's events read, so a caller keeps reading keys while
every producer writes the same typed fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    type: ClassVar[str] = ""

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, **{k: v for k, v in asdict(self).items() if v is not None}}


@dataclass(frozen=True)
class Loading(Event):
    """A model that takes a while to load is being loaded."""

    type = "loading"
    model: str


@dataclass(frozen=True)
class Started(Event):
    type = "start"
    run_id: str
    model: str
    agent: str


@dataclass(frozen=True)
class Resumed(Event):
    type = "resume"
    run_id: str
    from_step: int  # the policy steps already done
    dropped: int | None = None  # step rows after the checkpoint, dropped to be done again
    tokens: int | None = None  # tokens the run had used


@dataclass(frozen=True)
class Thinking(Event):
    """A policy step has started (the model is being asked)."""

    type = "thinking"
    step: int


@dataclass(frozen=True)
class PolicyStep(Event):
    """A policy step has ended: what the model said, the calls it made, what of it could not be read."""

    type = "policy"
    step: int
    seconds: float
    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    calls: list[str] = field(default_factory=list)  # the tools it called, by name
    issues: list[str] = field(default_factory=list)  # malformed calls, reported back to the model
    answer: str | None = None  # the run's (or a turn's) answer, when this step gave it


@dataclass(frozen=True)
class ToolStep(Event):
    """One tool call (or an agent's own action: a plan, a program run) has ended."""

    type = "tool"
    step: int
    tool: str
    seconds: float
    error: bool
    content: str


@dataclass(frozen=True)
class Failed(Event):
    type = "error"
    error: str
    step: int | None = None

"""The Agent protocol: everything episode.py asks of an agent, with the defaults most agents keep.

An agent module defines one subclass and an instance of it named `AGENT`, which the registry names
(`toolpath.agents.<name>:AGENT`, kind "agent"). An episode calls, in this order:

    check_spec(spec)            the spec's agent.params as the agent's typed `Params` (validated here, once), or
                                a ValueError naming what is wrong with the spec, before anything starts
    needs_policy(params)        whether a model is loaded at all
    new_context(rt)             the agent's own per-process state (rt.context), never checkpointed
    prepare_sandbox(rt, box)    what the agent's programs expect to find in a fresh sandbox
    system_prompt(spec, params) the task step's system message
    build(rt, checkpointer)     the compiled graph (nodes.compile_graph)
    initial_state()             the graph's first state
    resume(rt)                  after a resume: rebuild what the process held from the recorded transcript
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ..kinds import validated
from ..state import AgentState, initial_state

if TYPE_CHECKING:
    from ..spec import TaskSpec
    from .nodes import Runtime


class AgentParams(BaseModel):
    """What an agent's `agent.params` may hold: an agent declares its own as a subclass, each parameter a field
    with its default, its range or choices as constraints and what it means as the description. A spec's
    params are read into it once (Agent.check_spec); the agent's nodes read the typed object (rt.params)."""

    # A misspelt parameter is an error, not a silently ignored key; the object is never changed once read.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Agent:
    name: ClassVar[str] = ""
    Params: ClassVar[type[AgentParams]] = AgentParams  # this agent's agent.params (none, unless it declares them)
    # those of `Params` that name a file the run writes (or reads and writes): a spec may come from anyone, so
    # the episode takes each against the spec's folder and refuses one outside it and $TOOLPATH_HOME (reach.py)
    written_params: ClassVar[tuple[str, ...]] = ()
    default_tools: ClassVar[list[str]] = []
    # A sandbox kind the agent needs unless the spec names one (visual_program runs programs), or None.
    sandbox: ClassVar[str | None] = None
    prompt: ClassVar[str] = ""  # the system prompt when it does not depend on the spec
    context_type: ClassVar[type | None] = None  # the dataclass of the agent's per-process state (rt.context)

    def check_spec(self, spec: TaskSpec) -> AgentParams:
        """The spec's agent.params as this agent's `Params`; ValueError naming each bad parameter
        ("agent.params.retries: ...") or what else this agent cannot run, before the episode starts."""
        return self.read_params(spec.agent.params)

    def read_params(self, values: dict[str, Any]) -> AgentParams:
        """`values` validated into `Params`: one ValueError naming every bad one as a spec writes it."""
        return validated(self.Params, values, "agent.params", f"agent {self.name!r}")

    def response_format(self, params: AgentParams) -> str | None:
        """The response grammar (policies.formats) the run's policy speaks; None for the default."""
        return None

    def needs_policy(self, params: AgentParams) -> bool:
        """Whether the run needs a model; an agent that can decide without one does not pay for loading it."""
        return True

    def new_context(self, rt: Runtime) -> Any:
        """The agent's typed per-process state, kept in rt.context: a fresh `context_type`, or None."""
        return self.context_type() if self.context_type is not None else None

    def prepare_sandbox(self, rt: Runtime, box: Any) -> None:
        """Make the freshly started sandbox ready for the agent's programs."""

    def system_prompt(self, spec: TaskSpec, params: AgentParams) -> str:
        return self.prompt

    def build(self, rt: Runtime, checkpointer: Any = None) -> Any:
        """The compiled LangGraph graph of this agent (see nodes.compile_graph)."""
        raise NotImplementedError(f"agent {self.name!r} does not build a graph")

    def initial_state(self) -> AgentState:
        """The graph's first state; an agent with state of its own extends the common one."""
        return initial_state()

    def resume(self, rt: Runtime) -> None:
        """After rt.transcript was re-read on resume: images earlier tool calls made keep their names (crop_1, …)."""
        for m in rt.transcript:
            if m.role == "tool":
                rt.ctx.images.update({Path(ref.name).stem: Path(ref.path) for ref in m.images if ref.name})

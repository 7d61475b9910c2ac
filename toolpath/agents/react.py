"""ReAct: think → tool call → observation, until the model answers (DeepEyesV2's loop with code, search, images).

    START → policy ─┬─ calls ──► tools ─┬─► policy …
                    ├─ answer / budget ─┴─► END
                    └─ malformed call (told what was wrong) ─► policy

The tools of one step share what is left of max_seconds (nodes.step_deadline): a code cell gets at most that
long, and no call starts once it has passed. The guards are not extra nodes: each node checks the budget and
loop limits before it returns, sets the status and routes itself there (Command(goto=…)). An extra node per
guard would add a LangGraph superstep (and a checkpoint) to every step for no behaviour.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from .base import Agent, AgentParams
from .nodes import END, Runtime, compile_graph, make_policy_node, make_tool_node

# Asking for the task "step by step" made small chat models work sums and lookups out in prose, skipping the tools
# they were given (and writing a hundred tokens before each call); this asks for the tool first.
SYSTEM_PROMPT = ("You are a helpful assistant. When a tool can do part of the task (compute, look up, act), call it "
                 "instead of working it out yourself; answer briefly once you know the answer.")


class ReActParams(AgentParams):
    # `format: deepeyes` is DeepEyesV2's grammar (<think>, then one of <code>, <tool_call>, <answer>; 9 turns
    # unless limits.max_steps says otherwise); see policies/formats/deepeyes.py.
    format: str = Field("json", description="response grammar: json (default), deepeyes or a registered format")
    first_call: str = Field("auto", description="the first step's reply: auto (the model decides), required (a "
                            "call to any tool) or a tool's name (a call to that tool)")
    last_call: str = Field("auto", description="the reply of the step that reaches max_steps, as first_call: "
                           "final_answer ends the run with an answer from what the model has")

    @field_validator("format")
    @classmethod
    def _known(cls, v: str) -> str:
        from .. import registry

        known = registry.declared("format")
        if v not in known:  # plugins may add formats: the registry, not a fixed list, says which there are
            raise ValueError(f"unknown response format; expected one of {', '.join(known)}")
        return v


class ReAct(Agent):
    name = "react"
    Params = ReActParams
    default_tools = ["calculator", "read_file", "final_answer"]
    prompt = SYSTEM_PROMPT

    def check_spec(self, spec) -> ReActParams:
        params = super().check_spec(spec)
        tools = spec.tools if spec.tools is not None else self.default_tools
        allowed = ("auto", "required", *tools) if tools else ("auto",)
        for key in ("first_call", "last_call"):
            if getattr(params, key) not in allowed:
                raise ValueError(f"agent.params.{key}: {getattr(params, key)!r} is not one of {', '.join(allowed)}")
        return params

    def response_format(self, params: ReActParams) -> str:
        return params.format

    def build(self, rt: Runtime, checkpointer=None):
        from ..state import AgentState

        policy = make_policy_node(rt, getattr(rt.params, "first_call", "auto"), getattr(rt.params, "last_call", "auto"))
        return compile_graph(rt, AgentState, {"policy": (policy, ("tools", "policy", END)),
                                              "tools": (make_tool_node(rt), ("policy", END))}, checkpointer)


AGENT = ReAct()

"""ReAct: think → tool call → observation, until the model answers (DeepEyesV2's loop with code, search, images).

    START → policy ─┬─ calls ──► tools ─┬─► policy …
                    ├─ answer / budget ─┴─► END
                    └─ malformed call (told what was wrong) ─► policy

The guards are not extra nodes: each node checks the budget and loop limits before it returns and sets the
status, and the routers read it. An extra node per guard would add a LangGraph superstep (and a checkpoint)
to every step for no behaviour.
"""

from __future__ import annotations

from .nodes import Runtime, after_policy, after_tools, make_policy_node, make_tool_node

DEFAULT_TOOLS = ["calculator", "read_file", "final_answer"]

SYSTEM_PROMPT = ("You are a careful assistant that solves the user's task step by step. Use a tool when it helps; "
                 "answer briefly once you know the answer.")


def build(rt: Runtime, checkpointer=None):
    from langgraph.graph import END, START, StateGraph

    from ..state import AgentState

    g = StateGraph(AgentState)
    g.add_node("policy", make_policy_node(rt))
    g.add_node("tools", make_tool_node(rt))
    g.add_edge(START, "policy")
    g.add_conditional_edges("policy", after_policy, {"tools": "tools", "policy": "policy", "end": END})
    g.add_conditional_edges("tools", after_tools, {"policy": "policy", "end": END})
    return g.compile(checkpointer=checkpointer)

"""`agent: graph`: the graph a spec declares (toolpath/graph_spec.py), run as a LangGraph graph.

    START → start node ─(conditional edges: the first `when` that holds on its result)─► next node … ─► END

One LangGraph node per declared node, routed by conditional edges from the node's result. A tool node makes
one recorded tool call, an agent node runs a whole agent nested in this run (agents/capabilities.py: its steps
recorded under this step, its usage counted here), a policy node asks a model with its own prompt (and its
own model, if it names one). A policy node is a step of the run, as a policy call is in every agent; a cycle
of tool nodes alone is bounded by the node visits LangGraph allows the run (its recursion limit): the visit
before the last ends the run as budget_exhausted, naming the nodes it went round, so LangGraph's own error never
reaches the user. The run's answer is the last node's result.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr

from ..graph_spec import END as SPEC_END
from ..graph_spec import GraphSpecError, holds, read_graph, render
from ..policies.base import PolicyError
from ..spec import node_model
from ..state import AgentState, Message, Observation, ToolCall
from ..tools.registry import ToolError
from .base import Agent, AgentParams
from .events import PolicyStep, Thinking
from .nodes import END, Runtime, Step, account_nested, budget_exceeded, execute_calls, node


class GraphState(AgentState, total=False):
    results: dict  # each node's latest result text, by node name
    last: str  # the previous node's result
    last_error: bool  # whether it failed
    next: str  # where the conditional edges go next (a node, or END)
    trail: list  # the nodes visited last, newest at the end (at most TRAIL), to name a loop the run went round


TRAIL = 64


def _visit_limit() -> int | None:
    """How many node visits LangGraph allows this run (the recursion limit episode.py gives it), or None
    outside a LangGraph run."""
    from langgraph.config import get_config

    try:
        return int(get_config()["recursion_limit"])
    except (RuntimeError, KeyError, TypeError, ValueError):
        return None


def _loop_words(trail: list[str], target: str, visits: int) -> str:
    """What a run that went round and round did, in the spec's terms: the nodes of the loop it was on."""
    seen = len(trail) - 1 - trail[::-1].index(target) if target in trail else len(trail) - 1
    loop = trail[seen:] + [target]
    return (f"the graph ran {visits} node visits without reaching its end: node {trail[-1]!r} loops back to "
            f"{target!r} (round {' -> '.join(loop)}); add an edge that leaves the loop (to: end, or a `when` that "
            f"stops holding) or raise limits.max_steps")


def _route(graph: dict, name: str, text: str, error: bool) -> str:
    for e in graph["edges"][name]:
        if holds(e["when"], text, error):
            return END if e["to"] == SPEC_END else e["to"]
    return END


def _policy_for(rt: Runtime, name: str, spec_node: dict) -> Any:
    """A policy node's own model (loaded once per process), else the run's."""
    if "model" not in spec_node:
        return rt.policy
    cache = rt.context.setdefault("policies", {})
    if name not in cache:
        from ..policies.base import load

        cache[name] = load(node_model(name, spec_node["model"]))  # checked before the run (check_spec)
    return cache[name]


def _ask(rt: Runtime, name: str, spec_node: dict, values: dict, state: GraphState, st: Step):
    """A policy node: (result text, failed, messages, step extras)."""
    prompt = render(spec_node["policy"], values)
    default_input = "{last}" if state.get("last") else "{instruction}"
    question = render(spec_node.get("input", default_input), values)
    messages = [Message(role="system", content=prompt), Message(role="user", content=question)]
    try:
        policy = _policy_for(rt, name, spec_node)
        generation = {"temperature": rt.spec.model.temperature, "max_new_tokens": rt.spec.model.max_new_tokens,
                      "seed": rt.spec.seed + state["steps"] + 1, "step": state["steps"] + 1, "format": rt.format}
        rt.emit(Thinking(state["steps"] + 1))
        resp = policy.respond(messages, [], **generation)
    except PolicyError as err:
        return f"policy: {err}", True, messages, {}
    text = (resp.answer or resp.text or "").strip()
    extra = {"raw": resp.raw, "tokens_in": resp.tokens_in, "tokens_out": resp.tokens_out}
    return text, False, [*messages[1:], Message(role="assistant", content=text)], extra


def make_graph_node(rt: Runtime, graph: dict, name: str):

    spec_node = graph["nodes"][name]
    kind = spec_node["kind"]

    def graph_step(state: GraphState, st: Step) -> Any:
        values = {"instruction": rt.spec.instruction, "last": state.get("last", ""), **state.get("results", {})}
        update: dict[str, Any] = {}
        if kind == "policy":
            update["steps"] = state["steps"] + 1
            text, failed, messages, extra = _ask(rt, name, spec_node, values, state, st)
            tokens = (extra.pop("tokens_in", 0), extra.pop("tokens_out", 0))
            update.update(tokens_in=state["tokens_in"] + tokens[0], tokens_out=state["tokens_out"] + tokens[1])
            update = st.record("policy", messages, update, tokens_in=tokens[0], tokens_out=tokens[1], graph_node=name,
                               **extra, **({"error": text} if failed else {}))
            rt.emit(PolicyStep(update["steps"], st.seconds, text, tokens[0], tokens[1]))
        else:
            if kind == "tool":
                call = ToolCall(id=f"{name}_{state['seq'] + 1}", name=spec_node["tool"],
                                arguments=render(spec_node.get("arguments", {}), values))
                # the spec's author wrote this call: a loop of nodes repeats it on purpose, so it always runs
                done = execute_calls(rt, state, [call], answer_repeats=False)
            else:
                call = ToolCall(id=f"{name}_{state['seq'] + 1}", name=f"agent:{spec_node['agent']}",
                                arguments={"instruction": render(spec_node.get("instruction", "{instruction}"), values),
                                           "images": render(spec_node.get("images", []), values)})
                done = execute_calls(rt, state, [call], act=lambda c: _run_agent(rt, name, spec_node, c))
            obs = done.observations[-1] if done.observations else {"content": "not run", "error": True}
            text, failed = obs.get("content", ""), bool(obs.get("error"))
            if kind == "agent" and not failed:  # its answer is the node's result; the observation says more
                text = rt.context.pop("answer", None) or text
            update.update(account_nested(state, done.used))
            messages = [Message(role="assistant", content="", tool_calls=[call]), *done.messages]
            update = st.record("tools", messages, update, observations=done.observations, graph_node=name)
        trail = [*state.get("trail", []), name][-TRAIL:]
        update.update(results={**state.get("results", {}), name: text}, last=text, last_error=failed, trail=trail)
        target = _route(graph, name, text, failed)
        reason = budget_exceeded({**state, **update}, rt.spec) if target != END else None
        visits, limit = state["seq"] + 1, _visit_limit()
        if not reason and target != END and limit is not None and visits >= limit - 1:
            reason = _loop_words(trail, target, visits)
        if reason:
            update.update(status="budget_exhausted", error=reason)
            target = END
        elif target == END and failed:
            update.update(status="failed", error=f"node {name!r} failed and no edge took it on: {text[:300]}")
        elif target == END:
            update.update(status="finished", answer=text)
        update["next"] = target
        return update

    return node(rt, graph_step)


def _run_agent(rt: Runtime, name: str, spec_node: dict, call: ToolCall) -> tuple[Observation, Any]:
    from .capabilities import run_agent

    try:
        result = run_agent(rt.ctx, name, spec_node["agent"], call.arguments["instruction"], call.arguments["images"])
    except ToolError as err:
        return Observation(call_id=call.id, tool=call.name, content=str(err), error=True), None
    rt.context["answer"] = (result.data or {}).get("answer")
    return Observation(call_id=call.id, tool=call.name, content=result.content, artifacts=result.artifacts), None


class GraphParams(AgentParams):
    # The graph's grammar (node kinds, edge conditions, reachability) is graph_spec.py's, whose messages name
    # the node or edge: the fields take any value and read_graph says what is wrong with it.
    nodes: Any = Field(None, description="the graph's nodes by name: each a tool, an agent or a policy step "
                                         "(toolpath/graph_spec.py)")
    edges: Any = Field(default_factory=list, description="[{from, to, when}] tried in order after `from`; `to: end` "
                                                         "ends the run")
    start: Any = Field(None, description="the first node (default: the first one listed)")
    _graph: dict = PrivateAttr(default_factory=dict)  # read_graph's reading, set once by check_spec

    @property
    def graph(self) -> dict:
        return self._graph


class GraphAgent(Agent):
    name = "graph"
    Params = GraphParams
    default_tools = []  # the tools its tool nodes name (check_spec, build)

    def check_spec(self, spec) -> GraphParams:
        from .. import registry
        from ..tools.registry import get_tool

        params = self.read_params(spec.agent.params)
        try:
            graph = read_graph(spec.agent.params)  # its keys known to Params
            for name, n in graph["nodes"].items():
                if n["kind"] == "policy" and "model" in n:
                    node_model(name, n["model"])
        except GraphSpecError as err:
            raise ValueError(str(err)) from None
        agents = registry.declared("agent")
        for name, n in graph["nodes"].items():
            if n["kind"] == "agent" and (n["agent"] not in agents or n["agent"] == "graph"):
                raise ValueError(f"agent.params.nodes.{name}: unknown agent {n['agent']!r}; agents: "
                                 f"{', '.join(a for a in agents if a != 'graph')}")
            if n["kind"] == "tool":
                try:
                    get_tool(n["tool"])
                except ToolError as err:
                    raise ValueError(f"agent.params.nodes.{name}: {err}") from None
                if spec.tools is not None and n["tool"] not in spec.tools:
                    raise ValueError(f"agent.params.nodes.{name}: tool {n['tool']!r} is not in the spec's tools "
                                     f"({', '.join(spec.tools)})")
        params._graph = graph
        return params

    def needs_policy(self, params: GraphParams) -> bool:
        # a policy node without a model of its own asks the run's; an agent node's nested run does too
        return any(n["kind"] == "agent" or n["kind"] == "policy" and "model" not in n
                   for n in params.graph["nodes"].values())

    def new_context(self, rt: Runtime) -> dict:
        return {}

    def build(self, rt: Runtime, checkpointer=None):
        from langgraph.graph import START, StateGraph

        from ..tools.registry import get_tool

        graph = rt.params.graph
        for n in graph["nodes"].values():
            if n["kind"] == "tool" and n["tool"] not in rt.tools:
                rt.tools[n["tool"]] = get_tool(n["tool"])
        g = StateGraph(GraphState)
        for name in graph["nodes"]:
            g.add_node(name, make_graph_node(rt, graph, name))
            targets = {e["to"] for e in graph["edges"][name] if e["to"] != SPEC_END}
            g.add_conditional_edges(name, lambda state: state["next"], {**{t: t for t in targets}, END: END})
        g.add_edge(START, graph["start"])
        rt.deferred = getattr(checkpointer, "commits_store_steps", False)
        return g.compile(checkpointer=checkpointer)

    def initial_state(self) -> GraphState:
        return {**super().initial_state(), "results": {}, "last": "", "last_error": False, "next": "", "trail": []}


AGENT = GraphAgent()

"""`agent: graph`: the graph a spec declares under `agent.params`, read and checked when the spec loads.

    agent:
      name: graph
      params:
        start: look                      # the first node (default: the first one listed)
        nodes:
          look:   {tool: spatial_query, arguments: {question: "{instruction}", images: [image_1, image_2]}}
          decide: {policy: "Say only left or right. The spatial agent said: {look}", model: local}
          act:    {agent: embodied, instruction: "put the red cube on the {decide} plate"}
        edges:
          - {from: look, to: decide}
          - {from: decide, to: act, when: {matches: "^(left|right)$"}}
          - {from: decide, to: end}

A node is exactly one of: `tool` (a call with `arguments`), `agent` (a whole agent run nested in this one, on
`instruction` and `images`), `policy` (a model step: the prompt, an optional `input` message and its own
`model`). Texts may name `{instruction}`, `{last}` (the previous node's result) and `{NODE}` (that node's
latest result). After a node, its edges are tried in order and the first whose `when` holds is taken
(`contains`, `equals`, `matches` on the result text; `error: true|false` on whether the node failed); no edge
taken ends the run, with the last result as the answer. Edges after one without `when` are never tried.

Checked here, each error naming the node: an unknown node in an edge or as start, a node no path from the
start reaches, and a cycle with no way out (no edge of its nodes leaves it, and each has an edge that always
holds). Whether a named tool or agent exists is checked when the episode starts.
"""

from __future__ import annotations

import re
from typing import Any

KINDS = ("tool", "agent", "policy")
NODE_KEYS = {"tool": {"tool", "arguments"}, "agent": {"agent", "instruction", "images"},
             "policy": {"policy", "input", "model"}}
CONDITIONS = {"contains", "equals", "matches", "error"}
END = "end"


class GraphSpecError(ValueError):
    """The declared graph is wrong; `field` says where (agent.params.nodes.X, agent.params.edges[N])."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def _node(name: str, node: Any) -> dict:
    where = f"agent.params.nodes.{name}"
    if not isinstance(node, dict):
        raise GraphSpecError(where, f"expected a mapping with one of {', '.join(KINDS)}, got {type(node).__name__}")
    kinds = [k for k in KINDS if k in node]
    if len(kinds) != 1:
        raise GraphSpecError(where, f"node {name!r} must be exactly one of {', '.join(KINDS)}; it has "
                             f"{', '.join(kinds) or 'none'}")
    kind = kinds[0]
    unknown = sorted(set(node) - NODE_KEYS[kind])
    if unknown:
        raise GraphSpecError(where, f"node {name!r} ({kind}): unknown key(s) {', '.join(unknown)}; expected "
                             f"{', '.join(sorted(NODE_KEYS[kind]))}")
    if not isinstance(node[kind], str) or not node[kind].strip():
        raise GraphSpecError(where, f"node {name!r}: {kind} must be a non-empty text")
    if kind == "tool" and not isinstance(node.get("arguments", {}), dict):
        raise GraphSpecError(where, f"node {name!r}: arguments must be a mapping")
    if kind == "agent" and not isinstance(node.get("images", []), list):
        raise GraphSpecError(where, f"node {name!r}: images must be a list of image names")
    return {**node, "kind": kind}


def _edge(i: int, edge: Any, nodes: dict) -> dict:
    where = f"agent.params.edges[{i}]"
    if not isinstance(edge, dict) or set(edge) - {"from", "to", "when"} or not {"from", "to"} <= set(edge):
        raise GraphSpecError(where, f"expected {{from: NODE, to: NODE or end, when: ...}}, got {edge!r}")
    for end in ("from", "to"):
        name = edge[end]
        if name not in nodes and not (end == "to" and name == END):
            raise GraphSpecError(where, f"unknown node {name!r} ({end}); nodes: {', '.join(nodes)}")
    when = edge.get("when")
    if when is not None:
        if not isinstance(when, dict) or len(when) != 1 or set(when) - CONDITIONS:
            raise GraphSpecError(where, f"when: expected one of {', '.join(sorted(CONDITIONS))}, got {when!r}")
        (cond, value), = when.items()
        if cond == "error" and not isinstance(value, bool):
            raise GraphSpecError(where, f"when.error: expected true or false, got {value!r}")
        if cond != "error" and not isinstance(value, str):
            raise GraphSpecError(where, f"when.{cond}: expected a text, got {value!r}")
        if cond == "matches":
            try:
                re.compile(value)
            except re.error as err:
                raise GraphSpecError(where, f"when.matches: not a regular expression: {err}") from None
    return {"from": edge["from"], "to": edge["to"], "when": when}


def read_graph(params: dict) -> dict:
    """The graph of `agent.params`, checked: {"start", "nodes": {name: node}, "edges": {name: [edge, …]}} where
    each node's edges stop after its first one without `when`. Raises GraphSpecError naming what is wrong."""
    nodes_in = params.get("nodes")
    if not isinstance(nodes_in, dict) or not nodes_in:
        raise GraphSpecError("agent.params.nodes", "an agent: graph spec needs a mapping of one or more nodes")
    nodes = {}
    for name, node in nodes_in.items():
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", name) or name == END:
            raise GraphSpecError("agent.params.nodes", f"bad node name {name!r}: letters, digits and _, not 'end'")
        nodes[name] = _node(name, node)
    edges_in = params.get("edges", [])
    if not isinstance(edges_in, list):
        raise GraphSpecError("agent.params.edges", "expected a list of edges")
    edges: dict[str, list[dict]] = {n: [] for n in nodes}
    for i, e in enumerate(edges_in):
        edge = _edge(i, e, nodes)
        out = edges[edge["from"]]
        if not out or out[-1]["when"] is not None:  # later ones can never be taken
            out.append(edge)
    start = params.get("start", next(iter(nodes)))
    if start not in nodes:
        raise GraphSpecError("agent.params.start", f"unknown node {start!r}; nodes: {', '.join(nodes)}")
    graph = {"start": start, "nodes": nodes, "edges": edges}
    _check_reachable(graph)
    _check_exits(graph)
    return graph


def _check_reachable(graph: dict) -> None:
    seen, todo = {graph["start"]}, [graph["start"]]
    while todo:
        for e in graph["edges"][todo.pop()]:
            if e["to"] != END and e["to"] not in seen:
                seen.add(e["to"])
                todo.append(e["to"])
    lost = [n for n in graph["nodes"] if n not in seen]
    if lost:
        raise GraphSpecError(f"agent.params.nodes.{lost[0]}", f"unreachable node(s) {', '.join(lost)}: no edge "
                             f"from {graph['start']!r} (the start) leads there")


def _check_exits(graph: dict) -> None:
    """Every cycle needs a way out: an edge leaving it, or a node whose edges may all fail (the run then ends)."""
    for comp in _cycles(graph):
        exits = any(not graph["edges"][n] or graph["edges"][n][-1]["when"] is not None or
                    any(e["to"] == END or e["to"] not in comp for e in graph["edges"][n]) for n in comp)
        if not exits:
            names = sorted(comp, key=list(graph["nodes"]).index)
            raise GraphSpecError(f"agent.params.nodes.{names[0]}", f"cycle with no exit through {', '.join(names)}: "
                                 "no edge leaves it and each of its nodes always takes the next one")


def _cycles(graph: dict) -> list[set[str]]:
    """The strongly connected parts of the graph that hold a cycle (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for e in graph["edges"][v]:
            w = e["to"]
            if w == END:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1 or any(e["to"] == v for e in graph["edges"][v]):
                out.append(comp)

    for v in graph["nodes"]:
        if v not in index:
            visit(v)
    return out


def holds(when: dict | None, text: str, error: bool) -> bool:
    """Whether an edge's condition holds for the previous node's result."""
    if when is None:
        return True
    (cond, value), = when.items()
    if cond == "error":
        return error is value
    if cond == "contains":
        return value.lower() in text.lower()
    if cond == "equals":
        return text.strip().lower() == value.strip().lower()
    return re.search(value, text) is not None


def render(template: Any, values: dict[str, str]) -> Any:
    """`{name}` in texts (also inside lists and mappings) replaced by values[name]; other braces kept."""
    if isinstance(template, str):
        return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: values.get(m.group(1), m.group(0)), template)
    if isinstance(template, list):
        return [render(t, values) for t in template]
    if isinstance(template, dict):
        return {k: render(v, values) for k, v in template.items()}
    return template

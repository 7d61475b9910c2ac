"""A run's reasoning graph on its page: the tool results and the answer as a column of nodes, each dependency an
arc on the left from the result to the step that used it (evals/dag/runs.py decides what "used" means).

Drawn as inline SVG on the server: no script and no inline style (the page's CSP forbids both), colours as SVG
attributes, every label escaped (and redacted) through pages.e, since results and answers are model or tool output.
At most STEPS steps of a run are read for it, so a huge run's page still costs one page of steps.
"""

from __future__ import annotations

from ..evals.dag.runs import RunGraph, run_graph
from .pages import e

STEPS = 1_000
ROW = 22  # pixels per node
LEFT = 150  # the node column; arcs bend left of it
LABEL_CHARS = 110
COLOURS = {"final": "#2e7d32", "unused": "#c62828", "used": "#546e7a"}


def _arc(top: int, bottom: int) -> str:
    y1, y2 = 16 + top * ROW, 16 + bottom * ROW
    bend = LEFT - 14 - min(LEFT - 20, 9 * (bottom - top))
    return f"<path d='M{LEFT - 6},{y1} C{bend},{y1} {bend},{y2} {LEFT - 6},{y2}' fill='none' stroke='#90a4ae'/>"


def svg(graph: RunGraph) -> str:
    index = {s.id: i for i, s in enumerate(graph.nodes)}
    orphans = {s.id for s in graph.unused}
    arcs, nodes = [], []
    for i, s in enumerate(graph.nodes):
        arcs += [_arc(index[p], i) for p in s.parents or () if p in index]
        kind = "final" if graph.final is not None and s.id == graph.final.id else \
            "unused" if s.id in orphans else "used"
        label = s.content if len(s.content) <= LABEL_CHARS else s.content[: LABEL_CHARS - 1] + "…"
        y = 16 + i * ROW
        nodes.append(f"<circle cx='{LEFT}' cy='{y}' r='6' fill='{COLOURS[kind]}'><title>{e(kind)}</title></circle>"
                     f"<text x='{LEFT + 14}' y='{y + 4}' font-size='12' fill='#222'>[{s.id}] {e(label)} "
                     f"<tspan fill='#777'>({e(s.reasoning)})</tspan></text>")
    height = 16 + len(graph.nodes) * ROW
    return (f"<svg class=dag xmlns='http://www.w3.org/2000/svg' width='100%' height='{height}' "
            f"role='img' aria-label='reasoning graph'>{''.join(arcs)}{''.join(nodes)}</svg>")


def section(steps: list[dict], more: bool = False) -> str:
    """The page's "Reasoning graph" section from the run's first steps (`more`: it has more than were read)."""
    graph = run_graph(steps)
    if graph.closeness is None:
        return ("<h2>Reasoning graph</h2><p class=muted>No tool results, so no graph: closeness is measured on what "
                "the run's tools returned.</p>")
    state = "closed" if graph.closed else f"{len(graph.unused)} result(s) never used by a later step"
    note = " Of the run's first steps only." if more or graph.truncated else ""
    return (f"<h2>Reasoning graph</h2><p>Closeness {graph.closeness:.2f} ({e(state)}): green the answer, red a result "
            f"nothing after it used; an arc joins a result to the step whose arguments or reasoning show it.{note}</p>"
            + svg(graph))

"""What a trajectory's graph measures: is it valid, is it closed, how much of it is used, its shape, its answer.

    check(trajectory) -> Check      check_text(text) -> Check (text that is not a trajectory: one `syntax` violation)

    valid       no violation of the format's rules except orphans (rules.py)
    closed      valid, and every step but the final one is used by a later step
    closeness   the share of steps, the final one aside, that a later step uses (1 when there are none); measured
                on any readable trajectory, valid or not
    depth       the steps on the longest chain of dependencies (a fact alone: 1)
    width       the most steps at one depth
    branching   the mean number of later steps that use a step, over the steps some later step uses
    answer      the final step's boxed answer, or None

Shape is measured over the dependencies that follow the rules (on an earlier step that exists), so a broken
trajectory still has one. Over a set of samples the Perfect Reasoning Rate (PRR) is the share that are closed and
answer correctly (benchmarks/dag_math.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .answer import boxed
from .reader import DagSyntaxError, Step, Trajectory, read_trajectory
from .rules import CLOSURE, Violation, final_step, unused, violations


@dataclass
class Check:
    valid: bool
    closed: bool
    closeness: float | None  # None: the text was not a trajectory
    violations: list[Violation] = field(default_factory=list)
    answer: str | None = None
    depth: int = 0
    width: int = 0
    branching: float = 0.0
    nodes: int = 0
    edges: int = 0
    facts: int = 0

    def to_json(self) -> dict:
        return {"valid": self.valid, "closed": self.closed, "closeness": self.closeness,
                "violations": [v.to_json() for v in self.violations], "answer": self.answer, "depth": self.depth,
                "width": self.width, "branching": self.branching, "nodes": self.nodes, "edges": self.edges,
                "facts": self.facts}


def edges(steps: list[Step]) -> list[tuple[Step, Step]]:
    """(parent, child) for each dependency on an earlier step that exists (the first step with that id)."""
    by_id: dict[int, Step] = {}
    out = []
    for s in steps:
        for p in dict.fromkeys(s.parents or ()):
            if p in by_id:
                out.append((by_id[p], s))
        if s.id is not None:
            by_id.setdefault(s.id, s)
    return out


def _shape(steps: list[Step]) -> tuple[int, int, float, int]:
    """(depth, width, branching, edge count)."""
    links = edges(steps)
    parents: dict[int, list[Step]] = {}
    children: dict[int, int] = {}
    for p, c in links:
        parents.setdefault(c.position, []).append(p)
        children[p.position] = children.get(p.position, 0) + 1
    depth: dict[int, int] = {}
    for s in steps:  # parents come earlier, so one pass in order
        depth[s.position] = 1 + max((depth[p.position] for p in parents.get(s.position, ())), default=0)
    levels: dict[int, int] = {}
    for d in depth.values():
        levels[d] = levels.get(d, 0) + 1
    branching = sum(children.values()) / len(children) if children else 0.0
    return max(depth.values(), default=0), max(levels.values(), default=0), round(branching, 4), len(links)


def check(trajectory: Trajectory) -> Check:
    steps = trajectory.steps
    found = violations(trajectory)
    valid = not any(v.kind not in CLOSURE for v in found)
    final = final_step(steps)
    others = len(steps) - (1 if final is not None else 0)
    closeness = 1.0 if others <= 0 else round(1 - len(unused(steps)) / others, 6)
    depth, width, branching, n_edges = _shape(steps)
    return Check(valid=valid, closed=valid and not found, closeness=closeness, violations=found,
                 answer=boxed(final.content) if final is not None else None, depth=depth, width=width,
                 branching=branching, nodes=len(steps), edges=n_edges, facts=sum(1 for s in steps if not s.parents))


def check_text(text: str) -> Check:
    """The check of a model's output: a text that is not a trajectory is one `syntax` violation, not an error."""
    try:
        return check(read_trajectory(text))
    except DagSyntaxError as err:
        return Check(valid=False, closed=False, closeness=None, violations=[Violation("syntax", "", str(err))])

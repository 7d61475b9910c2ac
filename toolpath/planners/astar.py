"""A* over one subtask's toolpaths: one tool per stage, real tool runs, cost–quality trade-off α.

The graph. A subtask of kind k is done in the stages STAGES[k], in order; a node at depth d is a toolpath that
has done the first d stages (its tools really ran, so it holds the image they produced). Its children are the
alternatives for stage d. A completed path (depth = number of stages) is a goal.

The objective. g = path_cost(C, Q, α) = C^α·(2−Q)^(2−α) with C the summed measured seconds of the path's steps
and Q the product of their measured qualities. It is not a sum of step costs, so f is not g + h: f is the
objective of the path completed optimistically, f = path_cost(C + H, Q, α), where H is the sum over the
remaining stages of the cheapest tool's `cost_min` (the fastest run the priors table has seen) and every
remaining step is assumed to have quality 1.

Why f never overestimates. path_cost is non-decreasing in C (α ≥ 0) and non-increasing in Q (2 − α ≥ 0).
Along a path C only grows (each step adds its measured seconds, ≥ that tool's cost_min ≥ the stage's cheapest
cost_min) and Q only shrinks (each step multiplies by a quality ≤ 1). So every completion of a node has
C_final ≥ C + H and Q_final ≤ Q, hence objective(completion) ≥ path_cost(C + H, Q) = f. The same argument shows f
is monotone along a path, so nodes come off the queue in non-decreasing f and the first goal popped (whose f is
its exact objective) is optimal. The guarantee holds as far as the priors' cost_min really bounds a tool's
seconds; a calibration that saw only slow runs makes the search greedier, never wrong about what it measured.

Lazy evaluation. A tool call is the expensive part, so a child is queued before it runs, with the optimistic
f of a step that costs its tool's cost_min and has quality 1; only when popped does it run (run_step), and it is
re-queued with its measured f — unless its quality is under the threshold or it raised, which prunes it.

heuristic=False is uniform-cost search on the same graph (H = 0, and a queued child's key is its parent's g):
the baseline the benchmarks compare node expansions against. Ties are broken by (deeper first, creation
order), so the same measured numbers always give the same decisions.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..tools.image.edit_base import STAGES, EditState, EditTool, StepOutcome, Subtask, path_cost, run_step, tools_for
from ..tools.image.priors import Prior, load_priors


@dataclass
class SearchResult:
    """What one search found, and how it searched. When nothing was found, `path` is the best partial path
    (the deepest that passed, cheapest first) and `reason` says which step stopped it."""

    found: bool
    path: list[str]  # tool names, one per stage (the best partial path when not found)
    state: EditState | None  # the final state; None when not found
    cost: float  # C: summed measured seconds of the chosen path's steps
    quality: float  # Q: product of the chosen path's measured step qualities
    objective: float  # path_cost(C, Q, alpha); inf when not found
    expansions: int  # nodes popped and expanded (their children queued)
    tool_calls: int  # tools run, including the pruned and failed ones
    seconds: float  # summed measured seconds of every tool call the search made (what the search cost)
    steps: list[StepOutcome]  # the outcomes along the chosen path
    tree: list[dict]  # every node, for a viewer: see _tree_row
    reason: str | None = None
    wall_seconds: float = 0.0  # the whole search, planner overhead included
    alpha: float = 1.0
    heuristic: bool = True

    def to_dict(self) -> dict:
        """JSON-able statistics and tree (no images)."""
        return {"found": self.found, "path": list(self.path), "cost": self.cost, "quality": self.quality,
                "objective": self.objective if math.isfinite(self.objective) else None,
                "expansions": self.expansions, "tool_calls": self.tool_calls, "seconds": self.seconds,
                "wall_seconds": self.wall_seconds, "alpha": self.alpha, "heuristic": self.heuristic,
                "reason": self.reason, "tree": self.tree}


@dataclass
class _Node:
    id: int
    parent: _Node | None
    tool: EditTool | None  # None for the root
    depth: int  # stages done once this node's tool has run
    f0: float  # the optimistic key it was queued with before running
    f: float
    status: str = "open"  # open → run → goal, or pruned / error
    cost: float = 0.0  # C of the path up to and including this step (once run)
    quality: float = 1.0  # Q of the path (once run)
    g: float | None = None
    state: EditState | None = None
    outcome: StepOutcome | None = None
    children: list[_Node] = field(default_factory=list)

    def path(self) -> list[_Node]:
        out, n = [], self
        while n is not None and n.tool is not None:
            out.append(n)
            n = n.parent
        return out[::-1]


def astar(state: EditState, subtask: Subtask, *, alpha: float = 1.0, threshold: float = 0.8,
          tools: Mapping[str, Sequence[EditTool]] | None = None, priors: Mapping[str, Prior] | None = None,
          heuristic: bool = True, max_expansions: int = 200) -> SearchResult:
    """Search the subtask's toolpaths for the one minimising path_cost(C, Q, alpha) whose every step passes
    `threshold`. `tools` maps stage → alternatives (default: tools_for(kind, stage)); `priors` maps tool name
    → Prior (default, and for any tool it lacks: load_priors)."""
    if not 0.0 <= alpha <= 2.0:
        raise ValueError(f"astar: alpha must be in [0, 2], got {alpha}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"astar: threshold must be in [0, 1], got {threshold}")
    if max_expansions < 1:
        raise ValueError(f"astar: max_expansions must be at least 1, got {max_expansions}")
    t_start = time.perf_counter()
    stages = _stages(subtask)
    graph = _graph(subtask.kind, stages, tools)
    search = _Search(subtask, stages, graph, alpha, threshold, heuristic, _priors(graph, priors))
    if any(not alts for alts in graph):
        empty = stages[next(i for i, alts in enumerate(graph) if not alts)]
        return search.result(None, f"no usable tool for stage {empty!r} of a {subtask.kind} subtask", t_start)
    goal, why = search.run(state, max_expansions)
    return search.result(goal, why, t_start)


def _stages(subtask: Subtask) -> tuple[str, ...]:
    if subtask.kind not in STAGES:
        raise ValueError(f"astar: subtask {subtask.id}: unknown kind {subtask.kind!r} (known: {', '.join(STAGES)})")
    return STAGES[subtask.kind]


def _graph(kind: str, stages: tuple[str, ...], tools: Mapping[str, Sequence[EditTool]] | None) -> list[list[EditTool]]:
    if tools is None:
        return [tools_for(kind, st) for st in stages]
    unknown = sorted(set(tools) - set(stages))
    if unknown:
        raise ValueError(f"astar: tools given for {unknown}, which are not stages of {kind} ({', '.join(stages)})")
    graph = []
    for st in stages:
        alts = list(tools.get(st, ()))
        for t in alts:
            if t.stage != st:
                raise ValueError(f"astar: tools[{st!r}] holds {t.name}, a tool for stage {t.stage!r}")
        names = [t.name for t in alts]
        if len(set(names)) != len(names):
            raise ValueError(f"astar: tools[{st!r}] names a tool twice: {names}")
        graph.append(alts)
    return graph


def _priors(graph: list[list[EditTool]], priors: Mapping[str, Prior] | None) -> dict[str, Prior]:
    every = {t.name: t for alts in graph for t in alts}
    given = dict(priors or {})
    missing = {n: t for n, t in every.items() if n not in given}
    if missing:
        given.update(load_priors(missing))
    return given


def _lower_bound(p: Prior) -> float:
    # A bad row (negative, NaN) must not make the heuristic overestimate: treat it as "no bound" (0).
    c = p.cost_min
    return c if math.isfinite(c) and c > 0 else 0.0


class _Search:
    def __init__(self, subtask, stages, graph, alpha, threshold, heuristic, priors):
        self.subtask, self.stages, self.graph = subtask, stages, graph
        self.alpha, self.threshold, self.heuristic = alpha, threshold, heuristic
        self.cmin = {t.name: _lower_bound(priors[t.name]) for alts in graph for t in alts}
        # rest[d]: the least the stages d.. can still cost (0 for uniform-cost search).
        self.rest = [0.0] * (len(stages) + 1)
        if heuristic:
            for d in range(len(stages) - 1, -1, -1):
                self.rest[d] = self.rest[d + 1] + min((self.cmin[t.name] for t in graph[d]), default=0.0)
        self.nodes: list[_Node] = []
        self.heap: list[tuple[float, int, int]] = []
        self.expansions = self.tool_calls = 0
        self.seconds = 0.0

    def _push(self, n: _Node) -> None:
        heapq.heappush(self.heap, (n.f, -n.depth, n.id))

    def _new(self, parent, tool, depth, f) -> _Node:
        n = _Node(len(self.nodes), parent, tool, depth, f, f)
        self.nodes.append(n)
        if parent is not None:
            parent.children.append(n)
        return n

    def run(self, state: EditState, max_expansions: int) -> tuple[_Node | None, str | None]:
        root = self._new(None, None, 0, path_cost(self.rest[0], 1.0, self.alpha))
        root.status, root.state, root.g = "run", state, path_cost(0.0, 1.0, self.alpha)
        self._push(root)
        while self.heap:
            _, _, nid = heapq.heappop(self.heap)
            node = self.nodes[nid]
            if node.status == "open":
                self._evaluate(node)
                continue
            if node.depth == len(self.stages):
                node.status = "goal"
                return node, None
            if self.expansions >= max_expansions:
                self._push(node)  # stays on the frontier, unexpanded
                return None, f"expansions exhausted ({max_expansions})"
            self._expand(node)
        return None, "every path was pruned"

    def _evaluate(self, node: _Node) -> None:
        """Run the queued node's tool on its parent's state and re-queue it with its measured f."""
        parent = node.parent
        out = run_step(node.tool, parent.state, self.subtask)
        self.tool_calls += 1
        self.seconds += out.seconds
        node.outcome = out
        node.cost = parent.cost + out.seconds
        node.quality = parent.quality * out.quality
        if out.error is not None:
            node.status = "error"
            return
        if out.quality < self.threshold:
            node.status = "pruned"
            return
        node.status, node.state = "run", out.state
        node.g = path_cost(node.cost, node.quality, self.alpha)
        node.f = path_cost(node.cost + self.rest[node.depth], node.quality, self.alpha)
        self._push(node)

    def _expand(self, node: _Node) -> None:
        self.expansions += 1
        d = node.depth
        for t in self.graph[d]:
            if self.heuristic:  # the child's own step at its cheapest, quality 1, then the rest
                f0 = path_cost(node.cost + self.cmin[t.name] + self.rest[d + 1], node.quality, self.alpha)
            else:
                f0 = node.g
            self._push(self._new(node, t, d + 1, f0))

    # ---- the answer ------------------------------------------------------------------------------------

    def result(self, goal: _Node | None, why: str | None, t_start: float) -> SearchResult:
        common = dict(expansions=self.expansions, tool_calls=self.tool_calls, seconds=self.seconds,
                      tree=[self._tree_row(n) for n in self.nodes], alpha=self.alpha, heuristic=self.heuristic)
        if goal is not None:
            chain = goal.path()
            return SearchResult(True, [n.tool.name for n in chain], goal.state, goal.cost, goal.quality, goal.g,
                                steps=[n.outcome for n in chain], reason=None,
                                wall_seconds=time.perf_counter() - t_start, **common)
        best = self._best_partial()
        chain = best.path() if best is not None else []
        return SearchResult(False, [n.tool.name for n in chain], None, best.cost if best else 0.0,
                            best.quality if best else 0.0, math.inf, steps=[n.outcome for n in chain],
                            reason=self._explain(why, best), wall_seconds=time.perf_counter() - t_start, **common)

    def _best_partial(self) -> _Node | None:
        passed = [n for n in self.nodes if n.status in ("run", "goal")]
        if not passed:
            return None
        return min(passed, key=lambda n: (-n.depth, n.g, n.id))

    def _explain(self, why: str | None, best: _Node | None) -> str:
        kind, n = self.subtask.kind, len(self.stages)
        head = f"{self.subtask.kind} subtask {self.subtask.id}: {why}"
        if best is None or not self.graph or any(not a for a in self.graph):
            return head
        done = " → ".join(x.tool.name for x in best.path()) or "(nothing done yet)"
        text = f"{head}; best partial path {done} ({best.depth}/{n} stages of {kind}, threshold {self.threshold})"
        if best.depth < n:
            failed = [c for c in best.children if c.status in ("pruned", "error")]
            if failed:
                parts = [f"{c.tool.name} raised {c.outcome.error}" if c.status == "error"
                         else f"{c.tool.name} scored {c.outcome.quality:.3f}" for c in failed]
                text += f"; at stage {self.stages[best.depth]!r}: " + "; ".join(parts)
            opened = [c.tool.name for c in best.children if c.status == "open"]
            if opened:
                text += f"; not yet run at stage {self.stages[best.depth]!r}: {', '.join(opened)}"
        return text

    def _tree_row(self, n: _Node) -> dict:
        """One node for a viewer. g/quality/seconds are None until the node's tool ran; `quality` is the step's
        measured quality and `path_quality` the path's product; `f0` is the optimistic key it was queued with."""
        out = n.outcome
        return {"id": n.id, "parent": n.parent.id if n.parent else None, "tool": n.tool.name if n.tool else None,
                "stage": self.stages[n.depth - 1] if n.tool else None, "depth": n.depth,
                "g": n.g, "f": n.f, "f0": n.f0, "quality": out.quality if out else None,
                "path_quality": n.quality if (out or n.tool is None) else None,
                "seconds": out.seconds if out else None, "cost": n.cost if (out or n.tool is None) else None,
                "status": n.status, "error": out.error if out else None}

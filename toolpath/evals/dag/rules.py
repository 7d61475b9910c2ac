"""The DAG-MATH format's rules, and every way a trajectory breaks them, each named.

The rules (the official few-shot instruction's): step ids are unique and strictly increasing; every id a step
depends on is an earlier step's, lower than its own; the last step, and only it, states the final answer in a
\\boxed{...}; every other step is used by a later one (closure). A trajectory that keeps all but closure is
*valid* (its format holds); one that keeps closure too is *closed*.

Violation kinds:
    syntax                  the text is not one trajectory (not JSON, or JSON of another shape)
    malformed               a step without an integer step_id, with dependencies that are not ids, or no statement
    empty                   no steps
    duplicate_id            a step id used before
    not_increasing          a step id not above every earlier one
    forward_reference       a dependency on a later step
    unknown_id              a dependency on an id no step has
    cycle                   steps that depend on each other in a ring (a step on itself included)
    no_final_answer         no step states a boxed answer
    several_final_answers   more than one step states a boxed answer
    final_answer_not_last   the one boxed answer is stated before the last step
    orphan                  a step, not the final one, that no later step uses (breaks closure only)
"""

from __future__ import annotations

from dataclasses import dataclass

from .answer import has_boxed
from .reader import Step, Trajectory

KINDS = ("syntax", "malformed", "empty", "duplicate_id", "not_increasing", "forward_reference", "unknown_id", "cycle",
         "no_final_answer", "several_final_answers", "final_answer_not_last", "orphan")
CLOSURE = ("orphan",)  # the kinds that leave the format valid but the trajectory not closed
MAX_EACH = 100  # violations listed of one kind; the rest are counted in one more (a hostile file has millions)
MAX_RINGS = 20  # cycles looked for: each one found costs its length to describe
RING_SHOWN = 12  # steps of a long cycle named in its description


@dataclass(frozen=True)
class Violation:
    kind: str
    where: str  # "step 4", "the step at position 3", or "" for the whole trajectory
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.where + ': ' if self.where else ''}{self.detail}"

    def to_json(self) -> dict:
        return {"kind": self.kind, "where": self.where, "detail": self.detail}


def final_step(steps: list[Step]) -> Step | None:
    """The step that states the answer: the one with a boxed answer when there is exactly one, else the last."""
    answering = [s for s in steps if has_boxed(s.content)]
    return answering[0] if len(answering) == 1 else (steps[-1] if steps else None)


def _ids(steps: list[Step]) -> list[Violation]:
    out, seen, highest = [], set(), None
    for s in steps:
        if s.id is None:
            continue
        if s.id in seen:
            out.append(Violation("duplicate_id", f"the step at position {s.position}",
                                 f"step_id {s.id} is already an earlier step's"))
        elif highest is not None and s.id < highest:
            out.append(Violation("not_increasing", s.name, f"comes after step {highest}: ids must increase"))
        seen.add(s.id)
        highest = s.id if highest is None else max(highest, s.id)
    return out


def _references(steps: list[Step]) -> list[Violation]:
    ids = {s.id for s in steps if s.id is not None}
    out = []
    for s in steps:
        for p in s.parents or ():
            if s.id is not None and p == s.id:
                continue  # a step on itself: a cycle, named there
            if p not in ids:
                out.append(Violation("unknown_id", s.name, f"depends on step {p}, which no step is"))
            elif s.id is not None and p > s.id:
                out.append(Violation("forward_reference", s.name, f"depends on step {p}, a later step"))
    return out


def _cycles(steps: list[Step]) -> list[Violation]:
    """Each ring of dependencies once, found by an iterative depth-first walk (a long chain needs no recursion)."""
    ids = {s.id for s in steps if s.id is not None}
    graph: dict[int, tuple[int, ...]] = {}
    for s in steps:
        if s.id is not None and s.id not in graph:
            graph[s.id] = tuple(p for p in s.parents or () if p in ids)
    out, colour, found = [], dict.fromkeys(graph, 0), set()  # 0 unseen, 1 on the path, 2 done
    for start in graph:
        if colour[start]:
            continue
        path, stack = [], [(start, iter(graph[start]))]
        colour[start] = 1
        path.append(start)
        while stack:
            node, parents = stack[-1]
            nxt = next(parents, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour.get(nxt) == 1:
                ring = path[path.index(nxt):]
                if frozenset(ring) not in found:
                    found.add(frozenset(ring))
                    shown = [*ring[:RING_SHOWN], *(["…"] if len(ring) > RING_SHOWN else []), nxt]
                    chain = " → ".join(f"step {i}" if i != "…" else i for i in shown)
                    out.append(Violation("cycle", f"step {nxt}", f"depends on itself through {chain}"
                                         if len(ring) > 1 else "depends on itself"))
                    if len(out) >= MAX_RINGS:
                        return out
            elif colour.get(nxt) == 0:
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(graph[nxt])))
    return out


def _final_answer(steps: list[Step]) -> list[Violation]:
    answering = [s for s in steps if has_boxed(s.content)]
    if not answering:
        return [Violation("no_final_answer", steps[-1].name,
                          "no step states a boxed answer (the last should say: The final answer is $\\boxed{...}$)")]
    if len(answering) > 1:
        return [Violation("several_final_answers", "", "boxed answers in " + ", ".join(s.name for s in answering))]
    if answering[0] is not steps[-1]:
        return [Violation("final_answer_not_last", answering[0].name,
                          f"states the boxed answer, but {steps[-1].name} comes after it")]
    return []


def unused(steps: list[Step], final: Step | None = ...) -> list[Step]:
    """The steps, besides the final one (by default final_step's), that no later step depends on."""
    final = final_step(steps) if final is ... else final
    later: set[int] = set()
    out = []
    for s in reversed(steps):
        if s is not final and (s.id is None or s.id not in later):
            out.append(s)
        later.update(s.parents or ())
    return out[::-1]


def violations(trajectory: Trajectory) -> list[Violation]:
    """Every violation of the format's rules in `trajectory`, in the order of KINDS."""
    steps = trajectory.steps
    if not steps:
        return [Violation("empty", "", "no steps")]
    out = [Violation("malformed", f"the step at position {pos}", what) for pos, what in trajectory.problems]
    out += _ids(steps) + _references(steps) + _cycles(steps) + _final_answer(steps)
    out += [Violation("orphan", s.name, "no later step depends on it") for s in unused(steps)]
    return _capped(sorted(out, key=lambda v: KINDS.index(v.kind)))


def _capped(found: list[Violation]) -> list[Violation]:
    """At most MAX_EACH of each kind, then one that counts the rest."""
    out, count = [], {}
    for v in found:
        count[v.kind] = count.get(v.kind, 0) + 1
        if count[v.kind] <= MAX_EACH:
            out.append(v)
        elif count[v.kind] == MAX_EACH + 1:
            out.append(Violation(v.kind, "", ""))  # filled in below with how many more
    return [Violation(v.kind, "", f"and {count[v.kind] - MAX_EACH} more of this kind") if not v.detail else v
            for v in out]

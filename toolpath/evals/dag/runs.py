"""An agent run read as a DAG-MATH graph: its tool results are the steps, its answer the final one.

A run's facts are what its tools returned; a result is *used* by a later step of the model when something it
gave appears in that step's call arguments or its reasoning (the model's text). Then the result is a parent of
every node that step makes: the results of its calls, or the final answer. A result no later step uses is an
orphan, as an unused step of a chain of thought is, and the run's closeness is the share of its results used.

What "appears" means, so that neither an echo nor a coincidence counts:
    numbers      compared as values (`1,234`, `1234.0` and `1234` are one number); a number counts when it is the
                 whole result or has two significant digits or more (a lone `1` is in every text)
    text         the whole result (4 to 200 characters), or a run of three words of it (12 characters or more),
                 compared without case or spacing
    artifacts    a file the result made, by its name, its file name or its sha256 (the first 12 digits)
Anything already in the task's instruction or in the call that asked for the result is no evidence of using
it, and a failed call's error is not a node. At most MAX_NODES results are read, and MAX_TEXT characters of each.

    run_graph(steps) -> RunGraph    steps: a run's StepRecords (or their rows), in order
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from ...state import StepRecord
from .reader import Step
from .rules import unused

MAX_NODES = 500
MAX_TEXT = 20_000
FINAL_TOOL = "final_answer"

_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])-?\d+(?:\.\d+)?(?:[eE]-?\d+)?(?!\w)")
_WORD = re.compile(r"\w+")
_NAME_CHARS = 3


def _numbers(text: str) -> dict[Decimal, int]:
    """Each number in `text` as a value, with its count of significant digits."""
    out: dict[Decimal, int] = {}
    for m in _NUMBER.finditer(text[:MAX_TEXT]):
        try:
            value = Decimal(m.group(0).replace(",", "")).normalize()
        except InvalidOperation:
            continue
        if value.is_finite():
            out[value] = max(out.get(value, 0), len(value.as_tuple().digits))
    return out


def _flat(text: str) -> str:
    return " ".join(text[:MAX_TEXT].lower().split())


def _trigrams(text: str) -> set[str]:
    words = _WORD.findall(text[:MAX_TEXT].lower())
    return {g for g in (" ".join(words[i:i + 3]) for i in range(len(words) - 2)) if len(g) >= 12}


@dataclass
class Evidence:
    """What of one result a later step would show if it used it."""

    numbers: set[Decimal] = field(default_factory=set)
    whole: str = ""
    trigrams: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)

    def found_in(self, text: str, numbers: set[Decimal], trigrams: set[str], flat: str) -> bool:
        return bool(self.numbers & numbers or (self.whole and self.whole in flat) or self.trigrams & trigrams
                    or any(name in text for name in self.names))


def evidence(content: str, artifacts: list[dict], known: str) -> Evidence:
    """The evidence of a result `content` (with its `artifacts`), less what `known` (the instruction and the call's
    own arguments) already says."""
    seen_numbers, seen_trigrams, seen_flat = set(_numbers(known)), _trigrams(known), _flat(known)
    found = _numbers(content)
    whole_number = len(found) == 1 and _NUMBER.fullmatch(content.strip() or "x") is not None
    numbers = {v for v, digits in found.items() if (digits >= 2 or whole_number) and v not in seen_numbers}
    flat = _flat(content)
    whole = flat if 4 <= len(flat) <= 200 and flat not in seen_flat and not whole_number else ""
    names = set()
    for a in artifacts:
        for name in (a.get("name"), str(a.get("path") or "").rsplit("/", 1)[-1], str(a.get("sha256") or "")[:12]):
            if name and len(name) >= _NAME_CHARS:
                names.add(name)
    return Evidence(numbers, whole, _trigrams(content) - seen_trigrams, names)


@dataclass
class RunGraph:
    nodes: list[Step]  # the results, then the answer (when the run gave one), ids 1, 2, ... in order
    final: Step | None
    closeness: float | None  # None: the run has no result to use
    unused: list[Step]
    truncated: bool = False  # more results than MAX_NODES: the graph is of the first ones

    @property
    def closed(self) -> bool:
        return self.closeness is not None and not self.unused

    def to_json(self) -> dict:
        return {"nodes": [{"id": s.id, "parents": list(s.parents or []), "label": s.content, "step": s.reasoning}
                          for s in self.nodes],
                "final": self.final.id if self.final else None, "closeness": self.closeness, "closed": self.closed,
                "unused": [s.id for s in self.unused], "truncated": self.truncated}

    def lines(self) -> list[str]:
        """The graph as text, a node a line: what it is, where it came from, what it uses."""
        if self.closeness is None:
            return ["reasoning graph: no tool results, so nothing to use (closeness undefined)"]
        state = "closed" if self.closed else f"{len(self.unused)} result(s) never used"
        out = [f"reasoning graph: {len(self.nodes)} nodes, closeness {self.closeness:.2f} ({state})"
               + (f"; the first {MAX_NODES} results only" if self.truncated else "")]
        orphans = {s.id for s in self.unused}
        for s in self.nodes:
            uses = ", ".join(map(str, s.parents or ())) or "nothing before it"
            mark = "  (unused)" if s.id in orphans else ""
            out.append(f"  [{s.id}] {s.content}  ({s.reasoning}; uses {uses}){mark}")
        return out


def _one_line(text: str, most: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= most else text[: most - 1] + "…"


def _instruction(records: list[StepRecord]) -> str:
    for r in records:
        if r.node == "task":
            return "\n".join(str(m.get("content") or "") for m in r.messages if m.get("role") == "user")
    return ""


def _policy_text(record: StepRecord) -> tuple[str, list[dict]]:
    """A model step's reasoning and its calls' arguments (as one text), and its calls."""
    calls = [c for m in record.messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    said = record.raw if isinstance(record.raw, str) else " ".join(
        str(m.get("content") or "") for m in record.messages if m.get("role") == "assistant")
    args = " ".join(json.dumps(c.get("arguments", {}), ensure_ascii=False) for c in calls)
    return f"{said}\n{args}", calls


def run_graph(steps) -> RunGraph:
    """The graph of a run from its steps (StepRecords or store rows), in order."""
    records = [s if isinstance(s, StepRecord) else StepRecord.from_row(s) for s in steps]
    instruction = _instruction(records)
    nodes: list[Step] = []
    proof: dict[int, Evidence] = {}  # node id -> its evidence
    pending: dict[str, tuple[tuple[int, ...], str]] = {}  # call id -> (parents, its arguments) until its result
    final: Step | None = None
    truncated = False
    for r in records:
        if r.node == "policy":
            text, calls = _policy_text(r)
            numbers, trigrams, flat = set(_numbers(text)), _trigrams(text), _flat(text)
            used = tuple(i for i, ev in proof.items() if ev.found_in(text, numbers, trigrams, flat))
            ends = [c for c in calls if c.get("name") == FINAL_TOOL]
            if ends or not calls:
                answer = ends[-1].get("arguments", {}).get("answer", "") if ends else text
                final = Step(len(nodes) + 1, len(nodes) + 1, used or None, f"answer: {_one_line(answer)}",
                             f"step {r.seq}")
            for c in calls:
                pending[str(c.get("id"))] = (used, json.dumps(c.get("arguments", {}), ensure_ascii=False))
        for o in r.observations:
            call = pending.pop(str(o.get("call_id")), None)
            if call is None or o.get("error") or o.get("tool") == FINAL_TOOL:
                continue
            if len(nodes) >= MAX_NODES:
                truncated = True
                continue
            parents, args = call
            content = str(o.get("content") or "")
            node = Step(len(nodes) + 1, len(nodes) + 1, parents or None,
                        f"{o.get('tool')}: {_one_line(content)}", f"step {r.seq}")
            nodes.append(node)
            proof[node.id] = evidence(content, o.get("artifacts") or [], f"{instruction}\n{args}")
            final = None  # an answer given before more results is not the run's last word
    if final is not None:
        final = Step(len(nodes) + 1, len(nodes) + 1, final.parents, final.content, final.reasoning)
        nodes.append(final)
    results = [s for s in nodes if s is not final]
    if not results:
        return RunGraph(nodes, final, None, [], truncated)
    orphans = unused(nodes, final)
    return RunGraph(nodes, final, round(1 - len(orphans) / len(results), 6), orphans, truncated)


def runs_closeness(store, run_ids: list[str]) -> dict:
    """An eval's runs as graphs: their mean closeness and the share closed, over the runs that have a tool result
    to use (`runs`: how many; the figures are None when none has)."""
    graphs = [g for g in (run_graph(store.steps(rid)) for rid in run_ids) if g.closeness is not None]
    if not graphs:
        return {"runs": 0, "mean": None, "closed": None}
    return {"runs": len(graphs), "mean": round(sum(g.closeness for g in graphs) / len(graphs), 4),
            "closed": round(sum(g.closed for g in graphs) / len(graphs), 4)}


def closeness_text(figures) -> str:
    """runs_closeness's figures as the line an eval's summary and report print beside the score (a stored summary
    edited by hand reads as not readable, never an error)."""
    try:
        if not figures.get("runs"):
            return "closeness: no run used a tool, so there is nothing to measure"
        return (f"closeness {float(figures['mean']):.3f} over the {int(figures['runs'])} runs with tool results "
                f"({float(figures['closed']):.0%} closed: every result used by a later step)")
    except (AttributeError, KeyError, TypeError, ValueError):
        return f"closeness: not readable in the stored summary ({str(figures)[:80]})"

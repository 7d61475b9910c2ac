"""An agent run read as a DAG-MATH graph: its tool results are the steps, its answer the final one.

A run's facts are what its tools returned; a result is *used* by a later step of the model when something it
gave appears in that step's call arguments or its reasoning (the model's text). Then the result is a parent of
every node that step makes: the results of its calls, or the final answer. A result no later step uses is an
orphan, as an unused step of a chain of thought is, and the run's closeness is the share of its results used.

What "appears" means, so that neither an echo nor a coincidence counts:
    numbers      compared as values (`1,234`, `1234.0` and `1234` are one number); a number counts when it is the
                 whole result or has two significant digits or more (a lone `1` is in every text)
    text         the whole result (one to three words, 4 characters or more), or a run of three words of it (12
                 characters or more), compared as words (case, spacing and punctuation aside)
    artifacts    a file the result made, by its name, its file name or its sha256 (the first 12 digits)
Anything already in the task's instruction or in the call that asked for the result is no evidence of using
it, and a failed call's error is not a node. Each result's evidence is a set of keys (number values, runs of one
to three words) indexed once, and each step looks its own keys up, so a run costs the length of its text, never
its steps times its results. At most MAX_STEPS steps and MAX_NODES results are read, MAX_TEXT characters of each.

    run_graph(steps) -> RunGraph    steps: a run's StepRecords (or their rows), in order
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from ...state import StepRecord
from .reader import Step
from .rules import unused

MAX_NODES = 500
MAX_STEPS = 2_000  # steps of a run read; a graph of a longer run is of its first ones
MAX_TEXT = 20_000
MAX_ARTIFACTS = 10  # per result, the files whose names count as evidence
FINAL_TOOL = "final_answer"

# A number's text; where it starts and ends is checked in _numbers (a lookbehind here would make the scan try every
# position of a long text instead of jumping to the digits).
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE]-?\d+)?")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_WORD = re.compile(r"\w+")


def _values(text: str):
    """The numbers of `text` as written: not inside a word or an identifier (x2, v1.2.3 count as no number)."""
    for m in _NUMBER.finditer(text):
        start, end = m.span()
        if (start and (text[start - 1].isalnum() or text[start - 1] in "._")) or \
                (end < len(text) and (text[end].isalnum() or text[end] in "_.")):
            continue
        raw = m.group(0).rstrip(",")
        # 1,234 is one number; 1,2,3 is three
        yield from [raw.replace(",", "")] if _THOUSANDS.fullmatch(raw) else [p for p in raw.split(",") if p]


def _numbers(text: str) -> dict[str, int]:
    """Each number in `text` as the key of its value ("#1234.5" for 1,234.50), with its significant digits."""
    out: dict[str, int] = {}
    for raw in _values(text[:MAX_TEXT]):
        try:
            value = Decimal(raw).normalize()
        except InvalidOperation:
            continue
        if value.is_finite():
            key = f"#{value:f}"
            out[key] = max(out.get(key, 0), len(value.as_tuple().digits))
    return out


def _words(text: str) -> list[str]:
    return _WORD.findall(text[:MAX_TEXT].lower())


def _grams(words: list[str], n: int) -> set[str]:
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def keys(text: str) -> set[str]:
    """Everything in a step's text a result's evidence is looked up by: its numbers' values and its runs of one to
    three words. Linear in the text, so a run costs its length, not its length times its results."""
    words = _words(text)
    return set(_numbers(text)) | _grams(words, 1) | _grams(words, 2) | _grams(words, 3)


def _phrase(text: str) -> set[str]:
    """A short text (a whole result, a file name) as the keys that show it: itself when it is one to three words,
    else its runs of three words."""
    words = _words(text)
    return {" ".join(words)} if 1 <= len(words) <= 3 else _grams(words, 3)


def evidence(content: str, artifacts: list[dict], known: str) -> set[str]:
    """The keys a later step shows when it uses a result `content` (with its `artifacts`), less what `known` (the
    instruction and the call's own arguments) already says."""
    found = _numbers(content)
    whole_number = len(found) == 1 and _NUMBER.fullmatch(content.strip()) is not None
    out = {k for k, digits in found.items() if digits >= 2 or whole_number}
    words = _words(content)
    if not whole_number and len(content.strip()) >= 4 and len(words) <= 3:  # a short result shows whole
        out |= _phrase(content)
    out |= {g for g in _grams(words, 3) if len(g) >= 12}  # a longer one by its distinctive runs of words
    for a in artifacts[:MAX_ARTIFACTS]:
        for name in (a.get("name"), str(a.get("path") or "").rsplit("/", 1)[-1], str(a.get("sha256") or "")[:12]):
            if name and len(str(name)) >= 3:
                out |= _phrase(str(name))
    return out - keys(known)


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
    text = " ".join(str(text)[: most * 8].split())  # a label's worth, before splitting a long text
    return text if len(text) <= most else text[: most - 1] + "…"


def _dicts(items) -> list[dict]:
    """The objects in a stored list: a store written by an older toolpath, or edited by hand, may hold anything."""
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []


def _instruction(records: list[StepRecord]) -> str:
    for r in records:
        if r.node == "task":
            return "\n".join(str(m.get("content") or "") for m in _dicts(r.messages) if m.get("role") == "user")
    return ""


def _policy_text(record: StepRecord) -> tuple[str, list[dict]]:
    """A model step's reasoning and its calls' arguments (as one text), and its calls."""
    said = [m for m in _dicts(record.messages) if m.get("role") == "assistant"]
    calls = [c for m in said for c in _dicts(m.get("tool_calls"))]
    text = record.raw if isinstance(record.raw, str) else " ".join(str(m.get("content") or "") for m in said)
    args = " ".join(json.dumps(c.get("arguments", {}), ensure_ascii=False, default=str) for c in calls)
    return f"{text[:MAX_TEXT]}\n{args[:MAX_TEXT]}", calls


def run_graph(steps) -> RunGraph:
    """The graph of a run from its steps (StepRecords or store rows), in order."""
    records = [s if isinstance(s, StepRecord) else StepRecord.from_row(s) for s in steps]
    instruction = _instruction(records)
    nodes: list[Step] = []
    shown_by: dict[str, set[int]] = {}  # evidence key -> the nodes it shows
    pending: dict[str, tuple[tuple[int, ...], str]] = {}  # call id -> (parents, its arguments) until its result
    final: Step | None = None
    truncated = len(records) > MAX_STEPS
    for r in records[:MAX_STEPS]:
        if r.node == "policy":
            text, calls = _policy_text(r)
            used = tuple(sorted({i for k in keys(text) for i in shown_by.get(k, ())}))
            ends = [c for c in calls if c.get("name") == FINAL_TOOL]
            if ends or not calls:
                given = ends[-1].get("arguments") if ends else None
                answer = given.get("answer", "") if isinstance(given, dict) else given if ends else text
                final = Step(len(nodes) + 1, len(nodes) + 1, used or None, f"answer: {_one_line(answer)}",
                             f"step {r.seq}")
            for c in calls:
                pending[str(c.get("id"))] = (used, json.dumps(c.get("arguments", {}), ensure_ascii=False,
                                                              default=str)[:MAX_TEXT])
        for o in _dicts(r.observations):
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
            artifacts = _dicts(o.get("artifacts"))
            for k in evidence(content, artifacts, f"{instruction}\n{args}"):
                shown_by.setdefault(k, set()).add(node.id)
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

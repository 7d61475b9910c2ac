"""Induction of subroutines: mining the toolpaths that keep succeeding, learning the preconditions that separate
where they worked from where they did not (decision stumps), and reading a policy's proposed subroutine."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..tools.image.edit_base import STAGES, EditTool
from .subroutines import Predicate, ProposalError, Subroutine, Trace, _number, make_id

# ---- mining --------------------------------------------------------------------------------------------------

def mine(traces: Sequence[Trace], kind: str, min_support: int = 3) -> list[Subroutine]:
    """Candidates for one kind: each toolpath that succeeded at least `min_support` times, with preconditions
    that separate the traces where it succeeded (positives) from the rest of the kind's traces (negatives:
    another toolpath was chosen, or this one failed). No negatives → no preconditions."""
    stages = len(STAGES[kind])
    of_kind = [t for t in traces if t.kind == kind]
    counts: dict[tuple[str, ...], int] = {}
    for t in of_kind:
        if t.success and len(t.tools) == stages:
            counts[t.tools] = counts.get(t.tools, 0) + 1
    out = []
    for tools, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if n < min_support:
            continue
        pos = [t for t in of_kind if t.success and t.tools == tools]
        neg = [t for t in of_kind if not (t.success and t.tools == tools)]
        preds = learn_preconditions([t.features for t in pos], [t.features for t in neg])
        out.append(Subroutine(make_id(kind, tools, preds), kind, tools, preds,
                              float(np.mean([t.cost for t in pos])), float(np.mean([t.quality for t in pos])),
                              source="mined"))
    return out


def learn_preconditions(pos: Sequence[Mapping[str, Any]], neg: Sequence[Mapping[str, Any]], *,
                        max_predicates: int = 2, min_gain: float = 0.05) -> list[Predicate]:
    """At most `max_predicates` decision stumps, chosen greedily, whose conjunction best separates `pos` from
    `neg` by Youden's J (true-positive rate − false-positive rate). A stump is added only if it raises J by at
    least `min_gain`; none when `neg` is empty (the toolpath is always the one that worked)."""
    if not pos or not neg:
        return []
    chosen: list[Predicate] = []
    best_j = 0.0  # no predicate: everything holds, TPR = FPR = 1
    for _ in range(max_predicates):
        step = None
        for p in _stumps(pos, neg):
            trial = chosen + [p]
            j = _youden(trial, pos, neg)
            if j >= best_j + min_gain and (step is None or j > step[0]):
                step = (j, p)
        if step is None:
            break
        best_j = step[0]
        chosen.append(step[1])
    return chosen


def _youden(preds: list[Predicate], pos, neg) -> float:
    tpr = sum(all(p.holds(f) for p in preds) for f in pos) / len(pos)
    fpr = sum(all(p.holds(f) for p in preds) for f in neg) / len(neg)
    return tpr - fpr


def _stumps(pos, neg):
    """Candidate predicates, in a fixed order: for each numeric feature of the positives, `< t` and `>= t` at
    the midpoints between consecutive distinct values; for each word-valued one, `== word`."""
    names = sorted({k for f in pos for k in f})
    for name in names:
        nums = sorted({x for f in [*pos, *neg] if (x := _number(f.get(name))) is not None})
        for a, b in zip(nums, nums[1:]):
            t = _round_between(a, b)
            yield Predicate(name, "<", t)
            yield Predicate(name, ">=", t)
        for w in sorted({f[name] for f in pos if isinstance(f.get(name), str)}):
            yield Predicate(name, "==", w)


def _round_between(a: float, b: float) -> float:
    """The shortest decimal strictly between a and b, so thresholds read well ("0.05", not "0.0512345")."""
    mid = (a + b) / 2
    for digits in range(1, 17):
        r = float(f"{mid:.{digits}g}")
        if a < r < b:
            return r
    return mid


# ---- proposals from a policy ---------------------------------------------------------------------------------

def parse_proposal(text: str, tools: Mapping[str, EditTool] | None = None) -> Subroutine:
    """A subroutine from a model's answer: JSON {"kind", "tools": [one per stage], "preconditions": ["f < v", …]},
    optionally inside a ```json fence or surrounded by prose. Checked against `tools` (default: the registered
    edit tools): known kind, one known tool per stage serving that stage, predicates that parse."""
    if not isinstance(text, str):
        raise ProposalError(f"proposal: expected text, got {type(text).__name__}")
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fence:
        body = fence.group(1).strip()
    if not body.startswith("{"):
        i, j = body.find("{"), body.rfind("}")
        if i < 0 or j <= i:
            raise ProposalError(f"proposal: no JSON object in {text[:120]!r}")
        body = body[i:j + 1]
    try:
        d = json.loads(body)
    except ValueError as err:
        raise ProposalError(f"proposal: not valid JSON ({err}): {body[:120]!r}") from None
    if not isinstance(d, dict):
        raise ProposalError(f"proposal: expected a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    if kind not in STAGES:
        raise ProposalError(f"proposal: unknown kind {kind!r} (known: {', '.join(STAGES)})")
    names = d.get("tools")
    stages = STAGES[kind]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(names) != len(stages):
        raise ProposalError(f"proposal: 'tools' must list one tool name per stage of {kind} {stages}, got {names!r}")
    raw_preds = d.get("preconditions", [])
    if not isinstance(raw_preds, list):
        raise ProposalError(f"proposal: 'preconditions' must be a list of texts, got {raw_preds!r}")
    preds = []
    for i, p in enumerate(raw_preds):
        try:
            preds.append(Predicate.parse(p))
        except ValueError as err:
            raise ProposalError(f"proposal: preconditions[{i}]: {err}") from None
    if tools is None:
        from ..tools.image.edit_base import edit_tools

        tools = edit_tools()
    check_tools(kind, names, tools, "proposal")
    return Subroutine(make_id(kind, names, preds), kind, tuple(names), preds, source="policy")


def check_tools(kind: str, names: Sequence[str], known: Mapping[str, EditTool], what: str) -> None:
    """Raise ProposalError unless each name is a known tool that does its stage of `kind`."""
    for stage, name in zip(STAGES[kind], names):
        t = known.get(name)
        if t is None:
            raise ProposalError(f"{what}: unknown tool {name!r} for stage {stage!r} of {kind}")
        if t.stage != stage or kind not in t.kinds:
            raise ProposalError(f"{what}: tool {name!r} does not do stage {stage!r} of {kind} "
                                f"(it does {t.stage!r} for {', '.join(t.kinds)})")

"""FaSTA*'s learned subroutines: short toolpaths with checkable preconditions, their statistics, and induction.

A subroutine is one tool per stage of a subtask kind plus preconditions — predicates over image features such as
"target_area < 0.05" — that say where it is known to work. The fast path takes the best subroutine whose
preconditions hold and runs it with a quality check after each tool; A* is the fallback. Unlike FaSTA*, the
preconditions are predicates a program checks (never free text an LLM matches), and a candidate subroutine is
validated by a caller-supplied A/B on a few held-out samples whose results are cached, instead of 2×25 full
pipeline reruns per proposal.

Induction. Every subtask's outcome is logged as a `Trace` (its features, toolpath, cost, quality, success).
Once k new successful traces are in (`due`), `induce` proposes, per kind, the toolpaths that succeeded at least
m times, each with at most two predicates learned as decision stumps that separate the traces where that
toolpath succeeded from those where it was not chosen or failed; a policy may propose subroutines too
(`parse_proposal`). A candidate is accepted only if, on held-out samples where its preconditions hold, it beats
the current behaviour by net benefit %Δcost − %Δquality < 0.

This module holds the data (predicates, subroutines, traces, verdicts); induction.py mines and learns them,
library.py keeps them. The library (subroutines, traces, cached validations) is one JSON file, by default
$TOOLPATH_HOME/subroutines/library.json, written atomically; a corrupt file is an error naming it.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..paths import home
from ..tools.image.edit_base import STAGES

FORMAT_VERSION = 1
SOURCES = ("mined", "policy", "seed")
VIAS = ("fast", "slow", "failed", "fixed")


class LibraryError(ValueError):
    """The library file cannot be used as it is (unreadable, not JSON, wrong shape)."""


class ProposalError(ValueError):
    """A proposed subroutine (model output: untrusted) is malformed or names what does not exist."""


def default_library_path() -> Path:
    return home() / "subroutines" / "library.json"


# ---- predicates ---------------------------------------------------------------------------------------------

OPS: dict[str, Callable[[Any, Any], bool]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt,
                                              ">=": operator.ge, "==": operator.eq}
_PRED = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(<=|>=|==|<|>)\s*(.+?)\s*$")
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def _number(v: Any) -> float | None:
    """A finite number from a feature value (bools count as 0/1), else None."""
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


@dataclass(frozen=True)
class Predicate:
    """`feature op value` over the features of an image: numbers with <, <=, >, >=, ==, or a word with ==
    (a categorical feature such as background == "textured")."""

    feature: str
    op: str
    value: float | str

    def __post_init__(self):
        if not isinstance(self.feature, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", self.feature):
            raise ValueError(f"predicate: bad feature name {self.feature!r}")
        if self.op not in OPS:
            raise ValueError(f"predicate {self.feature}: unknown operator {self.op!r} (use {', '.join(OPS)})")
        if isinstance(self.value, str):
            if self.op != "==":
                raise ValueError(f"predicate {self.feature} {self.op} {self.value!r}: "
                                 "a word can only be compared with ==")
        elif _number(self.value) is None:
            raise ValueError(f"predicate {self.feature} {self.op}: value must be a finite number or a word, "
                             f"got {self.value!r}")
        else:
            object.__setattr__(self, "value", float(self.value))

    def holds(self, features: Mapping[str, Any]) -> bool:
        """True when the feature is there and satisfies the comparison; a missing or non-finite one → False."""
        if self.feature not in features:
            return False
        v = features[self.feature]
        if isinstance(self.value, str):
            return isinstance(v, str) and v == self.value
        x = _number(v)
        return x is not None and bool(OPS[self.op](x, self.value))

    @classmethod
    def parse(cls, text: str) -> Predicate:
        if not isinstance(text, str):
            raise ValueError(f"predicate: expected text like 'target_area < 0.05', got {text!r}")
        m = _PRED.match(text)
        if not m:
            raise ValueError(f"predicate {text!r}: expected 'feature op value' with op one of {', '.join(OPS)}")
        feat, op, raw = m.groups()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
            value: float | str = raw[1:-1]
        else:
            try:
                value = float(raw)
            except ValueError:
                if not _WORD.match(raw):
                    raise ValueError(f"predicate {text!r}: value {raw!r} is neither a number nor a word") from None
                value = raw
        try:
            return cls(feat, op, value)
        except ValueError as err:
            raise ValueError(f"predicate {text!r}: {err}") from None

    def __str__(self) -> str:
        if isinstance(self.value, str):
            v = self.value if _WORD.match(self.value) else json.dumps(self.value)
        else:
            v = repr(self.value)
        return f"{self.feature} {self.op} {v}"


# ---- subroutines and traces ----------------------------------------------------------------------------------

@dataclass
class Subroutine:
    """A toolpath (one tool name per stage of `kind`) with the preconditions under which it is used.
    cost/quality are running averages over its validation and its uses (None: not measured yet)."""

    id: str
    kind: str
    tools: tuple[str, ...]
    preconditions: list[Predicate] = field(default_factory=list)
    cost: float | None = None
    quality: float | None = None
    uses: int = 0
    successes: int = 0
    source: str = "mined"

    def __post_init__(self):
        self.tools = tuple(self.tools)
        if self.kind not in STAGES:
            raise ValueError(f"subroutine {self.id}: unknown kind {self.kind!r}")
        if len(self.tools) != len(STAGES[self.kind]):
            raise ValueError(f"subroutine {self.id}: {self.kind} has stages {STAGES[self.kind]}, "
                             f"got tools {self.tools}")
        if self.source not in SOURCES:
            raise ValueError(f"subroutine {self.id}: source must be one of {SOURCES}, got {self.source!r}")

    def applies(self, features: Mapping[str, Any]) -> bool:
        return all(p.holds(features) for p in self.preconditions)

    @property
    def signature(self) -> str:
        """What makes two subroutines the same: kind, tools and preconditions (not their statistics)."""
        return f"{self.kind}|{'>'.join(self.tools)}|{' & '.join(sorted(map(str, self.preconditions)))}"

    def to_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "tools": list(self.tools),
                "preconditions": [str(p) for p in self.preconditions], "cost": self.cost, "quality": self.quality,
                "uses": self.uses, "successes": self.successes, "source": self.source}

    @classmethod
    def from_json(cls, d: Mapping) -> Subroutine:
        return cls(id=str(d["id"]), kind=d["kind"], tools=tuple(d["tools"]),
                   preconditions=[Predicate.parse(p) for p in d.get("preconditions") or []],
                   cost=None if d.get("cost") is None else float(d["cost"]),
                   quality=None if d.get("quality") is None else float(d["quality"]),
                   uses=int(d.get("uses", 0)), successes=int(d.get("successes", 0)), source=d.get("source", "mined"))


def make_id(kind: str, tools: Sequence[str], preconditions: Sequence[Predicate]) -> str:
    sig = f"{kind}|{'>'.join(tools)}|{' & '.join(sorted(map(str, preconditions)))}"
    return f"{kind}-{hashlib.sha1(sig.encode()).hexdigest()[:8]}"


@dataclass
class Trace:
    """One subtask's logged outcome. `sample` is the path of its saved input (image + subtask JSON beside it)
    that induction's held-out validation reruns; None when the input was not kept."""

    kind: str
    features: dict[str, Any]
    tools: tuple[str, ...]
    cost: float
    quality: float
    success: bool
    via: str
    sample: str | None = None

    def __post_init__(self):
        self.tools = tuple(self.tools)
        if self.kind not in STAGES:
            raise ValueError(f"trace: unknown kind {self.kind!r}")
        if self.via not in VIAS:
            raise ValueError(f"trace: via must be one of {VIAS}, got {self.via!r}")
        self.features = {str(k): _plain(v) for k, v in (self.features or {}).items()}
        self.cost, self.quality, self.success = float(self.cost), float(self.quality), bool(self.success)

    def to_json(self) -> dict:
        return {"kind": self.kind, "features": self.features, "tools": list(self.tools), "cost": self.cost,
                "quality": self.quality, "success": self.success, "via": self.via, "sample": self.sample}

    @classmethod
    def from_json(cls, d: Mapping) -> Trace:
        return cls(d["kind"], dict(d.get("features") or {}), tuple(d["tools"]), d["cost"], d["quality"],
                   d["success"], d["via"], d.get("sample"))


def _plain(v: Any) -> Any:
    """A JSON-safe feature value: numpy scalars become Python ones, non-finite numbers None."""
    if isinstance(v, str) or v is None:
        return v
    x = _number(v)
    if x is None:
        return None
    return bool(v) if isinstance(v, (bool, np.bool_)) else x


# ---- induction report ----------------------------------------------------------------------------------------

@dataclass
class Verdict:
    """One candidate's A/B: its numbers, the current behaviour's on the same samples, and the decision."""

    subroutine: Subroutine
    samples: int = 0
    cost: float | None = None
    quality: float | None = None
    base_cost: float | None = None
    base_quality: float | None = None
    d_cost_pct: float | None = None
    d_quality_pct: float | None = None
    net: float | None = None  # %Δcost − %Δquality; < 0 accepts
    accepted: bool = False
    replaces: str | None = None  # the id of the subroutine (same tools) it refines
    reason: str = ""

    def to_dict(self) -> dict:
        return {"id": self.subroutine.id, "kind": self.subroutine.kind, "tools": list(self.subroutine.tools),
                "preconditions": [str(p) for p in self.subroutine.preconditions], "source": self.subroutine.source,
                "samples": self.samples, "cost": self.cost, "quality": self.quality, "base_cost": self.base_cost,
                "base_quality": self.base_quality, "d_cost_pct": self.d_cost_pct,
                "d_quality_pct": self.d_quality_pct, "net": self.net, "accepted": self.accepted,
                "replaces": self.replaces, "reason": self.reason}


@dataclass
class InductionReport:
    proposed: list[Verdict] = field(default_factory=list)
    accepted: list[Verdict] = field(default_factory=list)
    rejected: list[Verdict] = field(default_factory=list)
    cached_hits: int = 0  # validations answered from the cache instead of calling validate
    validations: int = 0  # calls made to validate
    note: str = ""

    def to_dict(self) -> dict:
        return {"proposed": [v.to_dict() for v in self.proposed], "accepted": [v.to_dict() for v in self.accepted],
                "rejected": [v.to_dict() for v in self.rejected], "cached_hits": self.cached_hits,
                "validations": self.validations, "note": self.note}


def net_benefit(cost: float, quality: float, base_cost: float, base_quality: float) -> tuple[float, float, float]:
    """(%Δcost, %Δquality, %Δcost − %Δquality) of a candidate against the current behaviour. A zero baseline
    gives 0 for no change and ±inf for any change, so the sign of the decision stays right."""
    def pct(new: float, old: float) -> float:
        if old != 0:
            return 100.0 * (new - old) / abs(old)
        return 0.0 if new == old else math.copysign(math.inf, new - old)

    dc, dq = pct(cost, base_cost), pct(quality, base_quality)
    net = dc - dq if not (math.isinf(dc) and math.isinf(dq) and dc == dq) else 0.0
    return dc, dq, net

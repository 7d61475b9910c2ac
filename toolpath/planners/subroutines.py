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

The library (subroutines, traces, cached validations) is one JSON file, by default
$TOOLPATH_HOME/subroutines/library.json, written atomically; a corrupt file is an error naming it.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import os
import random
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..runs import default_home
from ..tools.image.edit_base import STAGES, EditState, EditTool, StepOutcome, Subtask, path_cost, run_step
from ..tools.image.priors import Prior

FORMAT_VERSION = 1
SOURCES = ("mined", "policy", "seed")
VIAS = ("fast", "slow", "failed", "fixed")


class LibraryError(ValueError):
    """The library file cannot be used as it is (unreadable, not JSON, wrong shape)."""


class ProposalError(ValueError):
    """A proposed subroutine (model output: untrusted) is malformed or names what does not exist."""


def default_library_path() -> Path:
    return default_home() / "subroutines" / "library.json"


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
    def parse(cls, text: str) -> "Predicate":
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
    def from_json(cls, d: Mapping) -> "Subroutine":
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
    def from_json(cls, d: Mapping) -> "Trace":
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


# ---- the library ---------------------------------------------------------------------------------------------

class Library:
    """Subroutines, the traces they are learned from, and cached validations, persisted in one JSON file.
    `tools` resolves tool names for run() and proposals (default: every registered edit tool)."""

    def __init__(self, path: Path | str | None = None, *, tools: Mapping[str, EditTool] | None = None):
        self.path = Path(path) if path is not None else default_library_path()
        self._tool_map = dict(tools) if tools is not None else None
        self.subroutines: list[Subroutine] = []
        self.traces: list[Trace] = []
        self.validations: dict[str, dict] = {}
        self.induced_at = 0  # len(traces) at the last induction
        if self.path.exists():
            self._load()

    # ---- persistence ----

    def _load(self) -> None:
        try:
            raw = json.loads(self.path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise LibraryError(f"subroutine library {self.path}: cannot read it as JSON: {err} "
                               "(fix or move the file; it is not replaced automatically)") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("subroutines"), list):
            raise LibraryError(f"subroutine library {self.path}: expected an object with a 'subroutines' list")
        where = "subroutines"
        try:
            self.subroutines = [Subroutine.from_json(d) for d in raw["subroutines"]]
            where = "traces"
            self.traces = [Trace.from_json(d) for d in raw.get("traces") or []]
            where = "validations"
            self.validations = {str(k): {"cost": float(v["cost"]), "quality": float(v["quality"]),
                                         "n": int(v.get("n", 0))} for k, v in (raw.get("validations") or {}).items()}
            where = "induced_at"
            self.induced_at = int(raw.get("induced_at", 0))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise LibraryError(f"subroutine library {self.path}: bad entry in {where!r}: {err}") from None
        ids = [s.id for s in self.subroutines]
        if len(set(ids)) != len(ids):
            raise LibraryError(f"subroutine library {self.path}: duplicate subroutine ids")

    def save(self) -> Path:
        """Write the library atomically (a temporary file in the same folder, then rename)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"version": FORMAT_VERSION, "subroutines": [s.to_json() for s in self.subroutines],
                "traces": [t.to_json() for t in self.traces], "validations": self.validations,
                "induced_at": self.induced_at}
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.path

    # ---- tools ----

    def tools(self) -> dict[str, EditTool]:
        if self._tool_map is None:
            from ..tools.image.edit_base import edit_tools

            return edit_tools()
        return self._tool_map

    def check(self, sub: Subroutine) -> None:
        """Raise ProposalError unless every tool of `sub` exists and serves its stage of `sub.kind`."""
        check_tools(sub.kind, sub.tools, self.tools(), f"subroutine {sub.id}")

    def _usable(self, sub: Subroutine) -> bool:
        known = self.tools()
        return all(n in known and known[n].available() is None for n in sub.tools)

    # ---- subroutines ----

    def get(self, sub_id: str) -> Subroutine | None:
        return next((s for s in self.subroutines if s.id == sub_id), None)

    def add(self, sub: Subroutine, *, save: bool = True) -> Subroutine:
        if self.get(sub.id) is not None:
            raise ValueError(f"subroutine library {self.path}: id {sub.id!r} is already there")
        self.subroutines.append(sub)
        if save:
            self.save()
        return sub

    def remove(self, sub_id: str, *, save: bool = True) -> None:
        self.subroutines = [s for s in self.subroutines if s.id != sub_id]
        if save:
            self.save()

    def best(self, kind: str, features: Mapping[str, Any], alpha: float,
             priors: Mapping[str, Prior] | None = None) -> Subroutine | None:
        """The subroutine of `kind` whose preconditions all hold and whose tools are usable here, minimising
        path_cost(avg cost, avg quality, alpha). A subroutine not measured yet is scored from `priors` (summed
        cost, product of qualities) when given, else ranked after every measured one."""
        # path_cost is C^α·(2−Q)^(2−α): with (2−Q), higher quality always lowers the score. FaSTA*'s
        # cost^α·Q^(2−α) grew with Q, so for α < 2 it preferred the lower-quality subroutine.
        scored = []
        for s in self.subroutines:
            if s.kind != kind or not s.applies(features) or not self._usable(s):
                continue
            est = self._estimate(s, priors)
            key = (0, path_cost(est[0], est[1], alpha)) if est else (1, path_cost(0.0, 1.0, alpha))
            scored.append((key, -s.successes, s.id, s))
        if not scored:
            path_cost(0.0, 1.0, alpha)  # still reject an alpha outside [0, 2]
            return None
        return min(scored, key=lambda x: x[:3])[3]

    @staticmethod
    def _estimate(s: Subroutine, priors: Mapping[str, Prior] | None) -> tuple[float, float] | None:
        if s.cost is not None and s.quality is not None:
            return s.cost, s.quality
        if priors and all(n in priors for n in s.tools):
            return sum(priors[n].cost for n in s.tools), float(np.prod([priors[n].quality for n in s.tools]))
        return None

    def run(self, sub: Subroutine, state: EditState, subtask: Subtask,
            threshold: float = 0.8) -> tuple[list[StepOutcome], bool]:
        """Run the subroutine's tools in order, checking quality after each; stop at the first step that raised
        or scored under `threshold`. Returns the outcomes so far and whether every step passed."""
        if sub.kind != subtask.kind:
            raise ValueError(f"subroutine {sub.id} is for {sub.kind} subtasks, not {subtask.kind} ({subtask.id})")
        known = self.tools()
        steps: list[StepOutcome] = []
        for name in sub.tools:
            t = known.get(name)
            if t is None or t.available() is not None:
                why = "is not registered" if t is None else f"is not usable here: {t.available()}"
                steps.append(StepOutcome(name, None, 0.0, 0.0, f"tool {name} {why}"))
                return steps, False
            out = run_step(t, state, subtask)
            steps.append(out)
            if out.error is not None or out.state is None or out.quality < threshold:
                return steps, False
            state = out.state
        return steps, True

    def update_stats(self, sub: Subroutine, cost: float, quality: float, success: bool, *, save: bool = True) -> None:
        """Fold one use into the averages. The validation estimate (or the first use) counts as one observation,
        so one bad run moves an average without erasing it. Failed uses count too: they cost what they cost."""
        w = sub.uses + (1 if sub.cost is not None else 0)
        sub.cost = float(cost) if sub.cost is None else (sub.cost * w + float(cost)) / (w + 1)
        wq = sub.uses + (1 if sub.quality is not None else 0)
        sub.quality = float(quality) if sub.quality is None else (sub.quality * wq + float(quality)) / (wq + 1)
        sub.uses += 1
        sub.successes += int(bool(success))
        if save:
            self.save()

    # ---- traces ----

    def record(self, trace: Trace, *, save: bool = True) -> None:
        self.traces.append(trace)
        if save:
            self.save()

    def new_successes(self) -> int:
        return sum(1 for t in self.traces[self.induced_at:] if t.success)

    def due(self, k: int = 20) -> bool:
        """At least k new successful traces since the last induction."""
        return self.new_successes() >= k

    # ---- induction ----

    def induce(self, validate: Callable[[Subroutine | None, list[str]], tuple[float, float]], k: int = 20, *,
               holdout: float = 0.3, max_holdout: int = 12, min_support: int = 3, seed: int = 0,
               proposals: Sequence[Subroutine] | None = None, force: bool = False) -> InductionReport:
        """Propose subroutines from the traces (and `proposals`), A/B each on held-out samples, keep the winners.

        Per kind, a `holdout` fraction (at most `max_holdout`) of the traces that kept a sample is set aside by
        a seeded shuffle; mining sees only the rest. A candidate is validated on the held-out samples where its
        preconditions hold: validate(candidate, samples) and validate(None, samples) (the current behaviour)
        each return (mean cost, mean quality), cached in the library by (signature, samples). Accepted iff
        %Δcost − %Δquality < 0. A candidate with the tools of an existing subroutine refines it and, if
        accepted, replaces it. Not due (fewer than k new successful traces) → nothing happens unless `force`."""
        report = InductionReport()
        if not force and not self.due(k):
            report.note = f"not due: {self.new_successes()} of {k} new successful traces"
            return report
        if not 0.0 < holdout < 1.0:
            raise ValueError(f"induce: holdout must be a fraction in (0, 1), got {holdout}")
        rng = random.Random(seed)
        held: dict[str, list[Trace]] = {}
        train: dict[str, list[Trace]] = {}
        for kind in sorted({t.kind for t in self.traces}):
            of_kind = [t for t in self.traces if t.kind == kind]
            with_sample = sorted({t.sample for t in of_kind if t.sample})
            rng.shuffle(with_sample)
            n_hold = min(max_holdout, max(1, round(holdout * len(with_sample)))) if with_sample else 0
            hold_ids = set(with_sample[:n_hold])
            held[kind] = [t for t in of_kind if t.sample in hold_ids]
            train[kind] = [t for t in of_kind if t.sample not in hold_ids]

        candidates: list[Subroutine] = []
        for kind in sorted(train):
            candidates += mine(train[kind], kind, min_support)
        for p in proposals or ():
            try:
                self.check(p)
                candidates.append(p)
            except ProposalError as err:
                report.rejected.append(Verdict(p, reason=f"invalid proposal: {err}"))
        present = {s.signature for s in self.subroutines}
        seen: set[str] = set()
        for cand in candidates:
            if cand.signature in present or cand.signature in seen:
                continue
            seen.add(cand.signature)
            verdict = self._ab(cand, held.get(cand.kind, []), validate, report)
            report.proposed.append(verdict)
            (report.accepted if verdict.accepted else report.rejected).append(verdict)
            if verdict.accepted:
                self._adopt(verdict)
                present = {s.signature for s in self.subroutines}
        self.induced_at = len(self.traces)
        self.save()
        return report

    def _ab(self, cand: Subroutine, held: list[Trace], validate, report: InductionReport) -> Verdict:
        v = Verdict(cand)
        old = next((s for s in self.subroutines if s.kind == cand.kind and s.tools == cand.tools), None)
        v.replaces = old.id if old else None
        samples = sorted({t.sample for t in held if t.sample and cand.applies(t.features)})
        v.samples = len(samples)
        if not samples:
            v.reason = "no held-out sample where its preconditions hold"
            return v
        base_sig = "current:" + cand.kind + "|" + ";".join(sorted(s.signature for s in self.subroutines
                                                                    if s.kind == cand.kind))
        try:
            v.cost, v.quality = self._validated(cand.signature, cand, samples, validate, report)
            v.base_cost, v.base_quality = self._validated(base_sig, None, samples, validate, report)
        except Exception as err:  # noqa: BLE001 — a validation that breaks rejects its candidate, not induction
            v.reason = f"validation failed: {type(err).__name__}: {err}"
            return v
        v.d_cost_pct, v.d_quality_pct, v.net = net_benefit(v.cost, v.quality, v.base_cost, v.base_quality)
        v.accepted = v.net < 0
        v.reason = (f"net benefit {v.net:+.2f}% (cost {v.d_cost_pct:+.2f}%, quality {v.d_quality_pct:+.2f}%) on "
                    f"{len(samples)} held-out samples: " + ("accepted" if v.accepted else "rejected, not < 0"))
        return v

    def _validated(self, sig: str, cand: Subroutine | None, samples: list[str], validate,
                   report: InductionReport) -> tuple[float, float]:
        key = hashlib.sha256(json.dumps([sig, samples]).encode()).hexdigest()[:24]
        hit = self.validations.get(key)
        if hit is not None:
            report.cached_hits += 1
            return hit["cost"], hit["quality"]
        report.validations += 1
        cost, quality = validate(cand, list(samples))
        cost, quality = float(cost), float(quality)
        if not (math.isfinite(cost) and math.isfinite(quality)):
            raise ValueError(f"validate returned non-finite numbers ({cost}, {quality})")
        self.validations[key] = {"cost": cost, "quality": quality, "n": len(samples)}
        return cost, quality

    def _adopt(self, v: Verdict) -> None:
        sub = v.subroutine
        new = Subroutine(make_id(sub.kind, sub.tools, sub.preconditions), sub.kind, sub.tools,
                         list(sub.preconditions), v.cost, v.quality, 0, 0, sub.source)
        if v.replaces:
            self.remove(v.replaces, save=False)
        if self.get(new.id) is None:
            self.subroutines.append(new)
        v.subroutine = new


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

"""The subroutine library: subroutines, the traces they are learned from and cached validations, persisted in one
JSON file; choosing the subroutine whose preconditions hold, running it, and accepting induced candidates."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..tools.image.edit_base import EditState, EditTool, StepOutcome, Subtask, path_cost, run_step
from ..tools.image.priors import Prior
from .induction import check_tools, mine
from .subroutines import (
    FORMAT_VERSION,
    InductionReport,
    LibraryError,
    ProposalError,
    Subroutine,
    Trace,
    Verdict,
    default_library_path,
    make_id,
    net_benefit,
)

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

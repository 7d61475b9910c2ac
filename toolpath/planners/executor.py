"""FaSTA*'s fast-slow execution of one subtask, without an agent: what the agent and the benchmarks share.

    features ─► best subroutine whose preconditions hold ─► run it, checking quality after each tool
                     │ none, or a step under the threshold
                     ▼
               A* over the subtask's tool subgraph (slow path)
                     │
               trace logged (features, toolpath, cost, quality, via) ─► induction when due

Modes: fast+slow (FaSTA*), slow only (pure A*), and `fixed_chain` (one fixed toolpath per kind, no search, no
checks) — the three the benchmark compares on the same tasks. Costs are measured seconds of tool calls; a
failed fast attempt's cost counts against the subtask, as it would for a user.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..tools.image.edit_base import STAGES, EditState, StepOutcome, Subtask, edit_tools, run_step, tools_for
from ..tools.image.priors import Prior, load_priors
from .astar import SearchResult, astar
from .library import Library
from .subroutines import Subroutine, Trace


@dataclass
class SubtaskRun:
    """What happened to one subtask: which route, the toolpath that produced the result, its numbers."""

    subtask: Subtask
    via: str  # "fast" (a subroutine did it), "slow" (A* did it), "fixed", or "failed"
    path: list[str]
    state: EditState | None  # the edited image is state.image; None when every route failed
    cost: float  # seconds of every tool call made for this subtask
    quality: float  # product of the chosen path's measured step qualities
    tool_calls: int
    features: dict[str, float] = field(default_factory=dict)
    fast: dict | None = None  # {"subroutine", "tools", "steps", "ok"} when a subroutine was tried
    search: SearchResult | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.state is not None and self.via != "failed"

    def summary(self) -> dict:
        """A JSON-able record for traces and answers (the search tree stays in `search`)."""
        out = {"id": self.subtask.id, "label": self.subtask.label, "via": self.via, "path": self.path,
               "cost_s": round(self.cost, 4), "quality": round(self.quality, 4), "tool_calls": self.tool_calls,
               "ok": self.ok}
        if self.fast:
            out["fast"] = {k: v for k, v in self.fast.items() if k != "steps"}
        if self.search is not None:
            out["search"] = {"expansions": self.search.expansions, "tool_calls": self.search.tool_calls,
                             "found": self.search.found}
        if self.error:
            out["error"] = self.error
        return out


def _steps_quality(steps: list[StepOutcome]) -> float:
    return float(np.prod([s.quality for s in steps])) if steps else 0.0


class FastSlow:
    """Runs subtasks the FaSTA* way and keeps the library learning. One instance per library and settings.

    `library=None` (or use_fast=False) is pure A*. `features` computes the precondition features of an image
    for a subtask (default: toolpath.tools.image.preconditions.image_features). Held-out samples for induction's
    A/B are the inputs of logged subtasks, saved under the library's folder."""

    def __init__(self, library: Library | None = None, *, alpha: float = 1.0, threshold: float = 0.8,
                 priors: dict[str, Prior] | None = None, use_fast: bool = True, learn: bool = True, k: int = 20,
                 heuristic: bool = True, features: Callable[[np.ndarray, Subtask], dict] | None = None,
                 keep_samples: bool = True):
        self.library = library
        self.alpha, self.threshold, self.k, self.heuristic = alpha, threshold, k, heuristic
        self.priors = priors if priors is not None else load_priors(edit_tools())
        self.use_fast = use_fast and library is not None
        self.learn = learn and library is not None
        self.keep_samples = keep_samples
        if features is None:
            from ..tools.image.preconditions import image_features as features
        self.features = features

    # ---- one subtask ------------------------------------------------------------------------------------

    def run(self, image: np.ndarray, subtask: Subtask) -> SubtaskRun:
        feats = self.features(image, subtask)
        start = EditState(image=image)
        spent, calls, fast = 0.0, 0, None
        if self.use_fast:
            sub = self.library.best(subtask.kind, feats, self.alpha)
            if sub is not None:
                steps, ok = self.library.run(sub, start, subtask, self.threshold)
                spent += sum(s.seconds for s in steps)
                calls += len(steps)
                fast = {"subroutine": sub.id, "tools": list(sub.tools), "ok": ok, "steps": steps,
                        "failed_at": None if ok else steps[-1].tool if steps else None}
                if ok:
                    q = _steps_quality(steps)
                    self.library.update_stats(sub, spent, q, True)
                    run = SubtaskRun(subtask, "fast", list(sub.tools), steps[-1].state, spent, q, calls, feats, fast)
                    self._log(run, image, steps)
                    return run
                self.library.update_stats(sub, spent, _steps_quality(steps), False)
        result = astar(start, subtask, alpha=self.alpha, threshold=self.threshold, priors=self.priors,
                       heuristic=self.heuristic)
        spent += result.seconds if result.seconds else sum(s.seconds for s in result.steps)
        calls += result.tool_calls
        if not result.found:
            run = SubtaskRun(subtask, "failed", result.path, None, spent, 0.0, calls, feats, fast, result,
                             error=result.reason)
            self._log(run, image, [])
            return run
        run = SubtaskRun(subtask, "slow", result.path, result.state, spent, result.quality, calls, feats, fast, result)
        self._log(run, image, result.steps)
        return run

    # ---- learning -----------------------------------------------------------------------------------------

    def _log(self, run: SubtaskRun, image: np.ndarray, steps: list[StepOutcome]) -> None:
        if not self.learn:
            return
        sample = self._save_sample(image, run.subtask) if self.keep_samples else None
        self.library.record(Trace(kind=run.subtask.kind, features=run.features, tools=tuple(run.path),
                                  cost=run.cost, quality=run.quality, success=run.ok, via=run.via, sample=sample))

    def _save_sample(self, image: np.ndarray, subtask: Subtask) -> str:
        """The subtask's input, kept for held-out validation: a PNG plus the subtask as JSON, content-named."""
        from PIL import Image

        folder = self.library.path.parent / "samples"
        folder.mkdir(parents=True, exist_ok=True)
        spec = json.dumps(subtask_to_json(subtask), sort_keys=True)
        key = hashlib.sha256(image.tobytes() + str(image.shape).encode() + spec.encode()).hexdigest()[:20]
        png = folder / f"{key}.png"
        if not png.exists():
            Image.fromarray(image).save(png)
            (folder / f"{key}.json").write_text(spec)
        return str(png)

    def learn_if_due(self, proposals: list[Subroutine] | None = None):
        """Induce new subroutines once k new successful traces are logged; None when not due."""
        if not self.learn or not self.library.due(self.k):
            return None
        return self.library.induce(self.validate, k=self.k, proposals=proposals)

    def validate(self, candidate: Subroutine | None, samples: list[str]) -> tuple[float, float]:
        """A/B on held-out samples, cheaply: the current behaviour's numbers are the ones its trace logged
        (no rerun); the candidate's tools are run on each sample, and where a step fails the threshold the
        agent would fall back to its current route, so that route's logged cost is added and its quality
        kept. This reruns one short toolpath per sample, not whole pipelines."""
        logged = {t.sample: t for t in self.library.traces if t.sample}
        costs, quals = [], []
        for s in samples:
            trace = logged.get(s)
            if trace is None:
                continue
            if candidate is None:
                costs.append(trace.cost)
                quals.append(trace.quality)
                continue
            image, subtask = load_sample(s)
            steps, ok = self.library.run(candidate, EditState(image=image), subtask, self.threshold)
            c = sum(st.seconds for st in steps)
            if ok:
                costs.append(c)
                quals.append(_steps_quality(steps))
            else:
                costs.append(c + trace.cost)
                quals.append(trace.quality)
        if not costs:
            raise ValueError("validate: none of the held-out samples has a logged trace")
        return float(np.mean(costs)), float(np.mean(quals))


def fixed_chain(image: np.ndarray, subtask: Subtask, chain: dict[str, tuple[str, ...]] | None = None) -> SubtaskRun:
    """The no-planning baseline: one fixed tool per stage (default: the first usable one), run without
    quality gates; the run fails only if a tool raises."""
    tools = edit_tools()
    names = (chain or {}).get(subtask.kind) or tuple(tools_for(subtask.kind, st)[0].name for st in STAGES[subtask.kind])
    state, steps, spent = EditState(image=image), [], 0.0
    for name in names:
        out = run_step(tools[name], state, subtask)
        steps.append(out)
        spent += out.seconds
        if out.state is None:
            return SubtaskRun(subtask, "failed", list(names), None, spent, 0.0, len(steps), error=out.error)
        state = out.state
    return SubtaskRun(subtask, "fixed", list(names), state, spent, _steps_quality(steps), len(steps))


def subtask_to_json(s: Subtask) -> dict:
    d = asdict(s)
    d["parents"] = list(s.parents)
    return d


def subtask_from_json(d: dict) -> Subtask:
    from ..tools.image.edit_base import Target

    t = d.get("target")
    return Subtask(id=d["id"], kind=d["kind"], target=Target(**t) if t else None, params=dict(d.get("params") or {}),
                   parents=tuple(d.get("parents") or ()))


def load_sample(png: str) -> tuple[np.ndarray, Subtask]:
    from PIL import Image

    p = Path(png)
    image = np.asarray(Image.open(p).convert("RGB"))
    return image, subtask_from_json(json.loads(p.with_suffix(".json").read_text()))


def run_chain(runner: Callable[[np.ndarray, Subtask], SubtaskRun], image: np.ndarray, subtasks: list[Subtask],
              on_subtask: Callable[[SubtaskRun], None] | None = None) -> tuple[np.ndarray, list[SubtaskRun]]:
    """Run the subtasks in order on the image, each on the result of the one before. A failed subtask leaves
    the image as it was and the chain goes on (its dependants may still make sense: "remove the cat" failing
    does not stop "make the wall yellow"), and is reported as failed."""
    runs = []
    for s in subtasks:
        r = runner(image, s)
        runs.append(r)
        if on_subtask:
            on_subtask(r)
        if r.ok:
            image = r.state.image
    return image, runs

"""GPTailor's zero-order search (Optuna's TPE) over which layers to remove, where each kept layer comes from
(a candidate, or a task-arithmetic merge of candidates), and each kept layer's output scale.

The search runs in three stages, each an Optuna study that starts from the best plan so far (enqueued as its
first trial, so a stage never ends worse than it began):
  1. layers: which `n_remove` layers go, plus one merge scale per candidate shared by all layers. A layer's
     removal score is its ShortGPT block-influence rank (as a share in (0, 1)) plus a searched offset in
     [-1, 1]; the `n_remove` lowest go. Offsets of 0 are ShortGPT's choice; any set can be reached. Seeded
     with ShortGPT's and the angular-distance block's choices on the base model and on each candidate.
  2. merge: per kept layer, one merge scale per candidate in {0, .25, .5, .75, 1} (all 0: the base layer;
     one 1 and the rest 0: that candidate's layer).
  3. scale: per kept layer, an output scale in [0.7, 1.3] (step 0.05), applied to the weights (tailor_layers).
The objective is the share of the base model's calibration score (tailor_layers.share).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ..progress import Progress
from .tailor_layers import Plan

MERGE_STEP = 0.25
SCALE_RANGE, SCALE_STEP = (0.7, 1.3), 0.05
STAGE_SHARES = (0.4, 0.3)  # layers, merge; scale gets the rest


@dataclass
class SearchResult:
    best: Plan
    best_value: float
    trials: list[dict] = field(default_factory=list)


def removal_order(influence: list[float]) -> list[float]:
    """Each layer's rank by block influence as a share in (0, 1): the least influential layer is lowest."""
    n = len(influence)
    ranks = sorted(range(n), key=lambda i: (influence[i], i))
    prior = [0.0] * n
    for r, i in enumerate(ranks):
        prior[i] = (r + 0.5) / n
    return prior


def stage_sizes(trials: int) -> tuple[int, int, int]:
    t1 = max(1, round(trials * STAGE_SHARES[0]))
    t2 = max(0, min(trials - t1, round(trials * STAGE_SHARES[1])))
    return t1, t2, trials - t1 - t2


class Search:
    def __init__(self, objective: Callable[[Plan], tuple[float, dict]], n_layers: int, n_remove: int,
                 n_candidates: int, influence: list[float], seed: int):
        self.objective, self.n_layers, self.n_remove = objective, n_layers, n_remove
        self.n_candidates, self.seed = n_candidates, seed
        self.prior = removal_order(influence)
        self.best: Plan | None = None
        self.best_value = -math.inf
        self.trials: list[dict] = []
        self._line: Progress | None = None

    def keep_from_offsets(self, offsets: list[float]) -> list[int]:
        score = [self.prior[i] + offsets[i] for i in range(self.n_layers)]
        removed = set(sorted(range(self.n_layers), key=lambda i: (score[i], i))[:self.n_remove])
        return [i for i in range(self.n_layers) if i not in removed]

    def _run(self, stage: str, plan: Plan, detail: dict) -> float:
        value, metrics = self.objective(plan)
        self.trials.append({"stage": stage, "value": round(value, 6), **{k: round(v, 6) for k, v in metrics.items()},
                            "removed": [i for i in range(self.n_layers) if i not in plan.keep], **detail})
        if value > self.best_value:
            self.best, self.best_value = plan, value
        if self._line:
            self._line.update(1, value=f"best {self.best_value:.4f}")
        return value

    def _study(self, trials: int):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(seed=self.seed, multivariate=True,
                                             n_startup_trials=max(1, min(5, trials // 3)))
        return optuna.create_study(direction="maximize", sampler=sampler)

    # -- stage 1: which layers, and one merge per candidate for all of them
    def _layers(self, trials: int, seeds: list[dict]) -> None:
        study = self._study(trials)
        for params in seeds[:trials]:
            study.enqueue_trial(params)

        def objective(trial) -> float:
            offsets = [trial.suggest_float(f"offset_{i}", -1.0, 1.0) for i in range(self.n_layers)]
            merge = [trial.suggest_float(f"merge_{k}", 0.0, 1.0, step=MERGE_STEP) for k in range(self.n_candidates)]
            keep = self.keep_from_offsets(offsets)
            plan = Plan(keep=keep, merge={i: list(merge) for i in keep})
            return self._run("layers", plan, {"merge": merge})

        study.optimize(objective, n_trials=trials)

    # -- stage 2: per kept layer, its own merge scales
    def _merge(self, trials: int) -> None:
        start = self.best
        study = self._study(trials)
        study.enqueue_trial({f"merge_{i}_{k}": start.merge.get(i, [0.0] * self.n_candidates)[k]
                             for i in start.keep for k in range(self.n_candidates)})

        def objective(trial) -> float:
            merge = {i: [trial.suggest_float(f"merge_{i}_{k}", 0.0, 1.0, step=MERGE_STEP)
                         for k in range(self.n_candidates)] for i in start.keep}
            return self._run("merge", Plan(keep=list(start.keep), merge=merge), {})

        study.optimize(objective, n_trials=trials)

    # -- stage 3: per kept layer, its output scale
    def _scale(self, trials: int) -> None:
        start = self.best
        study = self._study(trials)
        study.enqueue_trial({f"scale_{i}": 1.0 for i in start.keep})

        def objective(trial) -> float:
            scale = {i: trial.suggest_float(f"scale_{i}", *SCALE_RANGE, step=SCALE_STEP) for i in start.keep}
            return self._run("scale", Plan(keep=list(start.keep), merge=dict(start.merge), scale=scale), {})

        study.optimize(objective, n_trials=trials)

    def seeds(self, angular: list[int]) -> list[dict]:
        """Stage 1's first trials: ShortGPT's and the angular block's removals on the base and each candidate."""
        out = []
        angular_offsets = [-1.0 if i in angular else 0.0 for i in range(self.n_layers)]
        merges = [[0.0] * self.n_candidates] + [[1.0 if j == k else 0.0 for j in range(self.n_candidates)]
                                                for k in range(self.n_candidates)]
        for offsets in ([0.0] * self.n_layers, angular_offsets):
            for merge in merges:
                p = {f"offset_{i}": offsets[i] for i in range(self.n_layers)}
                p.update({f"merge_{k}": merge[k] for k in range(self.n_candidates)})
                out.append(p)
        return out

    def run(self, trials: int, angular: list[int]) -> SearchResult:
        t1, t2, t3 = stage_sizes(trials)
        with Progress("tailoring search", trials, unit="trials") as self._line:
            self._layers(t1, self.seeds(angular))
            if self.n_candidates and t2:
                self._merge(t2)
            else:
                t3 += t2
            if t3:
                self._scale(t3)
            self._line.close(f"best share of the base score {self.best_value:.4f}")
        return SearchResult(self.best, self.best_value, self.trials)

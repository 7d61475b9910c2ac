"""What a benchmark is: the base class every adapter derives from, and the `Score` its scoring returns.

A benchmark turns its data into records, a record into a TaskSpec, and an episode's answer (or the world's
final state) into a Score. Everything but `records`, `to_task` and `score` has a default here, so the eval
runner calls each hook directly instead of asking whether it exists:

    name, description        what `toolpath eval` lists
    model                    the model an eval runs when it names none (None: the task spec's own default)
    overall_excludes         categories with a row of their own but left out of the overall score
    scores_final_state       True when `score_final` reads the world's final state (WebArena, MiniWoB++,
                             tabletop); the runner then passes it the state the episode recorded
    score(record, answer)    -> Score: the value, the per-sample metrics and why, worked out together
    score_final(record, answer, final_state) -> Score (default: `score`)
    metrics(record, answer)  -> dict (default: `score(...).metrics`)
    final_metrics(record, answer, final_state) -> dict: numbers measured on the final state (default: none)
    aggregate(metrics)       -> dict: the eval's figures over a set of samples (all, or one category) from their
                             per-sample metrics (default: each metric's mean over the samples that report it; POPE's
                             precision/recall/F1 and CHAIR_i are pooled over the set instead)
    scoring                  "toolpath" (default) or "official": which scorer `score` applies where ours and
                             the published one differ; `scored_as(mode)` is the same benchmark in the other
                             mode, so an eval stores both scores of every sample

Scoring modes. `official` reproduces the benchmark's published scoring code exactly, its known bugs included
(each named where it is reproduced, with the case that shows it); `toolpath` is what a careful human grader
would accept. A benchmark whose scorer has no such differences scores the same in both.

A sample's weight. The eval's score is the weighted mean of its samples' scores, weight 1 unless the score
says otherwise: a benchmark whose published figure is pooled over the set (VABench: points inside over all
points) gives each record's fraction with its number of points as the weight.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...spec import SCORING_MODES, TaskSpec


@dataclass
class Record:
    id: str
    category: str
    data: dict[str, Any] = field(default_factory=dict)


class Score(float):
    """A sample's score. It is a float (its value), so it adds, averages and compares as the number it is, and
    it carries the benchmark's own per-sample `metrics` and an `explanation`, computed in the same pass over
    the answer as the value."""

    metrics: dict[str, float]
    explanation: str
    weight: float  # the sample's weight in the eval's (weighted) mean score
    scores: dict[str, float]  # scoring mode → the value in that mode, when both were computed (scoring.score_run)
    weights: dict[str, float]  # scoring mode → the weight in that mode (a published pooling may weigh otherwise)

    def __new__(cls, value: float, metrics: dict[str, float] | None = None, explanation: str = "",
                weight: float = 1.0, scores: dict[str, float] | None = None,
                weights: dict[str, float] | None = None) -> Score:
        self = super().__new__(cls, value)
        self.metrics = dict(metrics or {})
        self.explanation = explanation
        self.weight = float(weight)
        self.scores = dict(scores or {})
        self.weights = dict(weights or {})
        return self

    @property
    def value(self) -> float:
        return float(self)

    def __repr__(self) -> str:
        return (f"Score({float(self)!r}, metrics={self.metrics!r}, explanation={self.explanation!r}, "
                f"weight={self.weight!r}, scores={self.scores!r})")



def check_scoring(mode: Any, where: str = "scoring") -> str:
    """The scoring mode, or a ValueError naming `where` and the modes there are."""
    if mode not in SCORING_MODES:
        raise ValueError(f"{where} must be one of {', '.join(SCORING_MODES)}, got {mode!r}")
    return mode


def as_score(value: Any) -> Score:
    """A Score for what a scoring hook returned (a plugin's benchmark may still return a bare number)."""
    return value if isinstance(value, Score) else Score(float(value))


def mean_metrics(metrics: list[dict[str, float]]) -> dict[str, float]:
    """Per metric, its mean over the samples that report it."""
    values: dict[str, list[float]] = {}
    for m in metrics:
        for k, v in m.items():
            values.setdefault(k, []).append(v)
    return {k: sum(v) / len(v) for k, v in values.items()}


class Benchmark:
    name: str = ""
    description: str = ""
    model: str | None = None
    overall_excludes: tuple[str, ...] = ()
    scores_final_state: bool = False
    scoring: str = "toolpath"

    def scored_as(self, mode: str) -> Benchmark:
        """This benchmark scoring in `mode` (itself when it already does): a shallow copy, so the data it
        read once is shared."""
        check_scoring(mode)
        if mode == self.scoring:
            return self
        other = copy.copy(self)
        other.scoring = mode
        return other

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        raise NotImplementedError

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        raise NotImplementedError

    def score(self, record: Record, answer: Any) -> Score:
        raise NotImplementedError

    def score_final(self, record: Record, answer: Any, final_state: dict) -> Score:
        return as_score(self.score(record, answer))

    def metrics(self, record: Record, answer: Any) -> dict[str, float]:
        return as_score(self.score(record, answer)).metrics

    def final_metrics(self, record: Record, answer: Any, final_state: dict) -> dict[str, float]:
        return {}

    def aggregate(self, metrics: list[dict[str, float]]) -> dict[str, float]:
        """The figures a set of samples reports, from the per-sample metrics of those that have any (a sample
        that never ran has none). A published figure that is a ratio over the whole set (POPE's precision,
        CHAIR_i) is not the mean of per-sample ratios: such a benchmark stores the counts per sample and
        pools them here."""
        return mean_metrics(metrics)

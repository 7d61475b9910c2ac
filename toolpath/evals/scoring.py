"""Scoring a finished episode: from the world's final state when its benchmark scores that, else its answer.

    recorded_final_state(store, run_id) -> dict | None
    score_run(bench, record, store, run_id, answer) -> Score (its metrics include the final-state ones)
"""

from __future__ import annotations

from typing import Any

from ..runs import Store
from ..state import StepRecord
from .benchmarks import Benchmark, Record, Score, as_score


def recorded_final_state(store: Store, run_id: str) -> dict | None:
    """The world's state as an environment-scored episode recorded it when it ended (the `final_state` of the
    computer-use or embodied agent's last step), or None when no step recorded one."""
    for step in reversed(store.steps(run_id)):
        record = StepRecord.from_row(step)
        if record.has("final_state"):
            return record.final_state
    return None


def score_run(bench: Benchmark, rec: Record, store: Store, run_id: str, answer: Any) -> Score:
    """The benchmark's score of a run: `score_final` on the recorded final state when the benchmark scores one
    (WebArena, MiniWoB++, tabletop) and the run recorded it, else `score` on the answer; its metrics are the
    score's own plus those measured on the final state (tabletop: trace errors)."""
    state = recorded_final_state(store, run_id) if bench.scores_final_state else None
    score = as_score(bench.score_final(rec, answer, state) if state is not None else bench.score(rec, answer))
    extra = bench.final_metrics(rec, answer, state or {})
    return Score(score.value, {**score.metrics, **extra}, score.explanation) if extra else score

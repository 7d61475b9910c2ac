"""Scoring a finished episode: from the world's final state when its benchmark scores that, else its answer.

    recorded_final_state(store, run_id) -> dict | None
    score_run(bench, record, store, run_id, answer) -> Score (its metrics include the final-state ones; its
                                                      `scores` hold its value in every scoring mode)
"""

from __future__ import annotations

from typing import Any

from ..runs import Store
from ..state import StepRecord
from .benchmarks import SCORING_MODES, Benchmark, Record, Score, as_score


def recorded_final_state(store: Store, run_id: str) -> dict | None:
    """The world's state as an environment-scored episode recorded it when it ended (the `final_state` of the
    computer-use or embodied agent's last step), or None when no step recorded one."""
    for step in reversed(store.steps(run_id)):
        record = StepRecord.from_row(step)
        if record.has("final_state"):
            return record.final_state
    return None


def _score_once(bench: Benchmark, rec: Record, answer: Any, state: dict | None) -> Score:
    return as_score(bench.score_final(rec, answer, state) if state is not None else bench.score(rec, answer))


def score_answer(bench: Benchmark, rec: Record, answer: Any, state: dict | None = None) -> Score:
    """The benchmark's score of an answer (and final state, when it scores one) in its own scoring mode, with
    the value in every mode in `scores`: computing the other costs nothing next to the episode, and lets a
    number be put beside a paper's."""
    score = _score_once(bench, rec, answer, state)
    each = {mode: score if mode == bench.scoring else _score_once(bench.scored_as(mode), rec, answer, state)
            for mode in SCORING_MODES}
    extra = bench.final_metrics(rec, answer, state or {})
    return Score(score.value, {**score.metrics, **extra}, score.explanation, score.weight,
                 {m: s.value for m, s in each.items()}, {m: s.weight for m, s in each.items()})


def score_run(bench: Benchmark, rec: Record, store: Store, run_id: str, answer: Any) -> Score:
    """The benchmark's score of a run: `score_final` on the recorded final state when the benchmark scores one
    (WebArena, MiniWoB++, tabletop) and the run recorded it, else `score` on the answer; its metrics are the
    score's own plus those measured on the final state (tabletop: trace errors)."""
    state = recorded_final_state(store, run_id) if bench.scores_final_state else None
    return score_answer(bench, rec, answer, state)

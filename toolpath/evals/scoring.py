"""Scoring a finished episode: from the world's final state when its benchmark scores that, else its answer.

    recorded_final_state(store, run_id) -> dict | None
    score_run(bench, record, store, run_id, answer) -> Score (its metrics include the final-state ones; its
                                                      `scores` hold its value in every scoring mode)
    score_task_run(store, run_id, spec, answer) -> (value | None, note | None)
                                                      a single task's run (`toolpath run`, `resume`) scored by
                                                      its spec's evaluator, the value kept on the run
    unknown_evaluator(spec) -> str | None             why a spec's evaluator names nothing that scores, if so
"""

from __future__ import annotations

from typing import Any

from .. import registry
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


def known_evaluators() -> dict[str, str]:
    """Evaluator names a spec may use, and who scores each: "scorer" (a scorer of evals/scorers.py, from the
    answer) or "benchmark" (a benchmark that scores the world's final state: WebArena, MiniWoB++, tabletop)."""
    from .scorers import SCORERS

    known = dict.fromkeys(SCORERS, "scorer")
    for name in registry.names("benchmark"):
        try:
            if registry.load("benchmark", name).scores_final_state:
                known.setdefault(name, "benchmark")
        except registry.RegistryError:  # a benchmark whose optional packages are missing scores nothing here
            continue
    return known


def unknown_evaluator(spec) -> str | None:
    """What is wrong with a spec's evaluator name when nothing scores it (a typo, refused before the run), else
    None."""
    from .scorers import SCORERS

    name = spec.evaluator.name if spec.evaluator is not None else None
    if name is None or name in SCORERS:
        return None  # the common case answers without loading every benchmark
    known = known_evaluators()
    return None if name in known else f"unknown evaluator {name!r}; expected one of {', '.join(sorted(known))}"


def score_task_run(store: Store, run_id: str, spec, answer: Any) -> tuple[float | None, str | None]:
    """(value, note) of a single task's run: its answer scored by the spec's evaluator and the value stored on
    the run; (None, None) without an evaluator. An evaluator that is a benchmark scoring the world's final
    state is not scored here, since its records and environment are the benchmark's: the note says so."""
    from .scorers import SCORERS, score

    if spec.evaluator is not None and spec.evaluator.name not in SCORERS:
        return None, (f"evaluator {spec.evaluator.name!r} is scored by its benchmark (toolpath eval); "
                      "this run is not scored")
    value = score(spec.evaluator, answer)
    if value is not None:
        store.update_run(run_id, score=value)
    return value, None

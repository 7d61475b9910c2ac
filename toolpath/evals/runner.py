"""Run a benchmark's records as episodes, one after another, scoring and storing each as it finishes.

Each sample's result is appended to the store the moment it is scored, so an interrupted eval keeps every
sample it finished. (Parallel workers, Ray and --resume are the eval platform's work, on top of this.)
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from ..agents.episode import EpisodeError, run_episode
from ..runs import Store
from .benchmarks import Record, get_benchmark


@dataclass
class SampleResult:
    sample_id: str
    category: str
    run_id: str | None
    status: str
    score: float
    tokens: int
    seconds: float
    answer: str | None = None
    error: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # the benchmark's own per-sample numbers, if any


def _means(samples: list[SampleResult]) -> dict[str, float]:
    """Per metric, its mean over the samples that report it."""
    values: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        for k, v in s.metrics.items():
            values[k].append(v)
    return {k: round(sum(v) / len(v), 4) for k, v in values.items()}


@dataclass
class EvalResult:
    eval_id: str
    benchmark: str
    model: str
    samples: list[SampleResult] = field(default_factory=list)
    seconds: float = 0.0
    overall_excludes: tuple[str, ...] = ()  # categories with a row of their own but not in the overall score

    def summary(self) -> dict:
        by_cat: dict[str, list[SampleResult]] = defaultdict(list)
        for s in self.samples:
            by_cat[s.category].append(s)
        kept = [s for s in self.samples if s.category not in self.overall_excludes]
        counted = [s.score for s in kept]
        out = {
            "eval_id": self.eval_id,
            "benchmark": self.benchmark,
            "model": self.model,
            "n": len(self.samples),
            "score": (sum(counted) / len(counted)) if counted else 0.0,
            "by_category": {k: {"n": len(v), "score": sum(s.score for s in v) / len(v),
                                **({"metrics": _means(v)} if any(s.metrics for s in v) else {})}
                            for k, v in sorted(by_cat.items())},
            "tokens": sum(s.tokens for s in self.samples),
            "seconds": round(self.seconds, 3),
        }
        if any(s.metrics for s in kept):
            out["metrics"] = _means(kept)
        if self.overall_excludes:  # say what the overall score is over, when it is not every sample
            out.update(overall_excludes=list(self.overall_excludes), n_overall=len(counted))
        return out


def final_state(store: Store, run_id: str) -> dict | None:
    """What an environment-scored episode recorded of its world as it ended (computer_use's finish step)."""
    for step in reversed(store.steps(run_id)):
        if "final_state" in step["payload"]:
            return step["payload"]["final_state"]
    return None


def score_run(bench, rec: Record, store: Store, run_id: str, answer: str | None) -> float:
    """The benchmark's score: from the final state of the environment when it scores that (WebArena,
    MiniWoB++: `score_final`), else from the answer."""
    if hasattr(bench, "score_final"):
        state = final_state(store, run_id)
        if state is not None:
            return bench.score_final(rec, answer, state)
    return bench.score(rec, answer)


def run_eval(benchmark: str, store: Store, model: str | None = None, limit: int | None = None, seed: int = 0,
             on_sample: Callable[[int, int, SampleResult], None] | None = None, on_event=None,
             data: str | None = None) -> EvalResult:
    bench = get_benchmark(benchmark, data=data)
    records: list[Record] = list(bench.records(limit=limit, seed=seed))
    model_name = model or getattr(bench, "model", None) or "local"  # a benchmark's own default (dom, detector)
    eval_id = store.create_eval(bench.name, model_name, {"limit": limit, "seed": seed,
                                                          **({"data": str(data)} if data else {})}, len(records))
    result = EvalResult(eval_id=eval_id, benchmark=bench.name, model=model_name,
                        overall_excludes=tuple(getattr(bench, "overall_excludes", ())))
    started = time.perf_counter()
    for i, rec in enumerate(records):
        spec = bench.to_task(rec, model=model)
        try:
            run = run_episode(spec, store, on_event=on_event, eval_id=eval_id)
        except EpisodeError as err:
            sample = SampleResult(rec.id, rec.category, None, "failed", 0.0, 0, 0.0, error=str(err))
        else:
            value = score_run(bench, rec, store, run.run_id, run.answer)
            store.update_run(run.run_id, score=value)
            # a benchmark may measure more than its score (edits: subtask success, cost, tool calls, quality)
            metrics = bench.metrics(rec, run.answer) if hasattr(bench, "metrics") else {}
            if hasattr(bench, "final_metrics"):  # measured on the world's final state (tabletop: trace errors)
                metrics = {**metrics, **bench.final_metrics(rec, run.answer, final_state(store, run.run_id) or {})}
            sample = SampleResult(rec.id, rec.category, run.run_id, run.status, value, run.tokens, run.seconds,
                                  run.answer, run.error, metrics)
        store.put_eval_sample(eval_id, rec.id, sample.run_id, rec.category, sample.status, sample.score, sample.tokens,
                              sample.seconds, {"answer": sample.answer, "error": sample.error,
                                               **({"metrics": sample.metrics} if sample.metrics else {})})
        result.samples.append(sample)
        if on_sample:
            on_sample(i + 1, len(records), sample)
    result.seconds = time.perf_counter() - started
    store.finish_eval(eval_id, result.summary())
    return result

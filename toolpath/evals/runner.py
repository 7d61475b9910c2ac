"""Run a benchmark's records as episodes and store each sample the moment it is scored.

    run_eval(benchmark, store, model=None, limit=None, seed=0, data=None, workers=1, executor="local",
             resume=None, timeout=None, retries=4, scoring="toolpath", on_sample=None, on_event=None) -> EvalResult

Samples run in this process (workers 1), in a pool of local worker processes, or as Ray tasks
(evals/executors.py); whichever runs them, each finished sample's row is appended to the store at once, so an
eval killed at any point resumes with `resume=EVAL_ID`: the same records are made again from the stored
parameters, the samples already stored are skipped, and the summary is computed over all of them, the same
numbers as an uninterrupted run. A run the kill left unfinished (or finished, but not yet stored as its
sample's) is adopted: the resumed eval continues it instead of starting the sample over, and any other run of
the eval that no sample refers to is marked abandoned, so each sample has exactly one run. Per sample: a time
limit (`timeout`), transient model errors retried with backoff (`retries` attempts, counted), tokens and cost
(evals/prices.py). Every sample is scored in both scoring modes (benchmarks/base.py); `scoring` names the one
that is its score, and the summary holds both (`scores`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..runs import Store
from ..spec import WEIGHTS
from .benchmarks import SCORING_MODES, Record, check_scoring, get_benchmark
from .benchmarks.base import mean_metrics
from .dag.runs import runs_closeness
from .sample import SAMPLE_KEY, SampleResult, check_agent_params

EXECUTORS = ("local", "ray")


def model_option(name: str, value, **beside):
    """An eval-wide model option as the spec normalises it (its own validator fills the defaults), or a ValueError
    naming the flag and what is wrong, before any sample starts; `beside`: the eval's other model options, checked
    with it (an engine that cannot take a kv_cache)."""
    from pydantic import ValidationError

    from ..policies.settings import model_settings
    from ..spec import ModelSpec

    try:
        spec = ModelSpec(options={**{k: v for k, v in beside.items() if v}, name: value})
        return model_settings(spec, at="").written(spec.options)[name]
    except ValidationError as err:
        raise ValueError(f"--{name}: {err.errors()[0]['msg'].removeprefix('Value error, ')}") from None
    except ValueError as err:  # a kind's option, named as the option is ("kv_cache.bits: ...")
        raise ValueError(f"--{name}: {err}") from None


def decoding_setting(decoding: dict) -> dict:
    """`decoding` as the spec normalises model.options.decoding, or a ValueError naming --decoding."""
    return model_option("decoding", decoding)


def weighted_score(samples: list[SampleResult], mode: str | None = None) -> float:
    """The samples' weighted mean score (in scoring `mode` with that mode's weights, else their own score and
    weight); 0 when no weight."""
    def weight(s: SampleResult) -> float:
        return s.weights.get(mode, s.weight) if mode else s.weight

    total = sum(weight(s) for s in samples)
    if not total:
        return 0.0
    return sum(weight(s) * (s.scores.get(mode, s.score) if mode else s.score) for s in samples) / total


def _scores(samples: list[SampleResult]) -> dict[str, float]:
    return {mode: round(weighted_score(samples, mode), 6) for mode in SCORING_MODES}


def _figures(aggregate: Callable[[list[dict]], dict], samples: list[SampleResult]) -> dict[str, float]:
    """The benchmark's own figures over `samples` (Benchmark.aggregate), rounded for the summary."""
    return {k: round(v, 4) for k, v in aggregate([s.metrics for s in samples if s.metrics]).items()}


@dataclass
class EvalResult:
    eval_id: str
    benchmark: str
    model: str
    samples: list[SampleResult] = field(default_factory=list)
    seconds: float = 0.0
    overall_excludes: tuple[str, ...] = ()  # categories with a row of their own but not in the overall score
    scoring: str = "toolpath"  # the mode of `score`; `scores` has both
    weights: str | None = None  # every task's model.options.weights when the eval set it (--weights)
    aggregate: Callable[[list[dict]], dict] = mean_metrics  # the benchmark's: per-sample metrics → its figures
    closeness: dict | None = None  # its runs read as reasoning graphs (evals/dag/runs.py), beside the score

    def summary(self) -> dict:
        by_cat: dict[str, list[SampleResult]] = defaultdict(list)
        for s in self.samples:
            by_cat[s.category].append(s)
        kept = [s for s in self.samples if s.category not in self.overall_excludes]
        out = {
            "eval_id": self.eval_id,
            "benchmark": self.benchmark,
            "model": self.model,
            "n": len(self.samples),
            "score": weighted_score(kept),
            "scoring": self.scoring,
            "scores": _scores(kept),
            "by_category": {k: {"n": len(v), "score": weighted_score(v), "scores": _scores(v),
                                **({"metrics": _figures(self.aggregate, v)} if any(s.metrics for s in v) else {})}
                            for k, v in sorted(by_cat.items())},
            "tokens": sum(s.tokens for s in self.samples),
            "seconds": round(self.seconds, 3),
            "retries": sum(s.retries for s in self.samples),
            "timed_out": sum(1 for s in self.samples if s.timed_out),
        }
        priced = [s.cost_usd for s in self.samples if s.cost_usd is not None]
        out["cost_usd"] = round(sum(priced), 6) if priced else None  # None: no sample's model has a price
        out["unpriced"] = sum(1 for s in self.samples if s.cost_usd is None)
        if any(s.metrics for s in kept):
            out["metrics"] = _figures(self.aggregate, kept)
        if self.weights:
            out["weights"] = self.weights
        if self.closeness is not None:
            out["closeness"] = self.closeness
        if self.overall_excludes:  # say what the overall score is over, when it is not every sample
            out.update(overall_excludes=list(self.overall_excludes), n_overall=len(kept))
        return out


class ResumeError(ValueError):
    """--resume names no eval, or one of another benchmark."""


def _sample_of(run: dict) -> str | None:
    """The sample a run of an eval was for (sample.sample_spec names it in the spec), or None."""
    try:
        return json.loads(run["spec"]).get("metadata", {}).get(SAMPLE_KEY)
    except (ValueError, AttributeError):
        return None


def _left_behind(store: Store, eval_id: str) -> list[dict]:
    """Runs of the eval that no sample refers to and no live process is running, oldest first."""
    return [r for r in store.unclaimed_runs(eval_id) if r["status"] not in ("running", "abandoned")]


def adopt_runs(store: Store, eval_id: str, wanted: set[str]) -> dict[str, str]:
    """sample id → the run a killed eval left for it (its newest), for each sample in `wanted` that has one;
    every other run left behind is marked abandoned, so no sample is counted twice."""
    adopted: dict[str, str] = {}
    for run in _left_behind(store, eval_id):
        sample = _sample_of(run)
        if sample not in wanted:
            store.abandon_run(run["id"], f"eval {eval_id} was interrupted during this run; its sample "
                                         f"({sample or 'not named'}) was stored from another run")
            continue
        if sample in adopted:
            store.abandon_run(adopted[sample], f"eval {eval_id} was interrupted during this run; its sample "
                                               f"({sample}) continues in a later run, {run['id']}")
        adopted[sample] = run["id"]
    return adopted


def abandon_left_behind(store: Store, eval_id: str) -> None:
    """At the end of an eval: runs no sample refers to (a worker killed at a time limit, or one that died)."""
    for run in _left_behind(store, eval_id):
        store.abandon_run(run["id"], f"no sample of eval {eval_id} refers to this run: its process ended before "
                                     f"it was stored (its sample, {_sample_of(run) or 'not named'}, was stored "
                                     "without it)")


def _job(store: Store, bench_name: str, data, rec: Record, model, eval_id: str, timeout, retries: int,
         run_id: str | None = None, scoring: str = "toolpath", weights: str | None = None) -> dict:
    return {"home": str(store.home), "benchmark": bench_name, "data": str(data) if data else None,
            "scoring": scoring, "weights": weights,
            "record": {"id": rec.id, "category": rec.category, "data": rec.data}, "model": model,
            "eval_id": eval_id, "timeout": timeout, "retries": retries, "run_id": run_id,
            # what the sample's process must see as this one does (TOOLPATH_DB, prices, the benchmarks' own
            # settings; sys.path for python: policies), whenever and wherever its worker was started
            "env": {k: v for k, v in os.environ.items() if k.startswith("TOOLPATH_")}, "sys_path": list(sys.path)}


def check_model_available(model_name: str) -> None:
    """Stop before any sample when a `local:NAME` model cannot load here: every sample would fail the same way."""
    if model_name.startswith("local:"):
        from ..policies.local_models import unavailable

        reason = unavailable(model_name.removeprefix("local:"))
        if reason:
            raise ValueError(reason)  # it names the model


def run_eval(benchmark: str, store: Store, model: str | None = None, limit: int | None = None, seed: int = 0,
             on_sample: Callable[[int, int, SampleResult], None] | None = None, on_event=None,
             data: str | None = None, workers: int = 1, executor: str = "local", resume: str | None = None,
             timeout: float | None = None, retries: int = 4, scoring: str = "toolpath",
             kv_cache: dict | None = None, weights: str | None = None,
             agent_params: dict | None = None, decoding: dict | None = None,
             allow_paths: list | None = None, categories: list[str] | None = None,
             engine: str | None = None) -> EvalResult:
    check_scoring(scoring)
    if weights is not None and weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if workers < 0 or (workers == 0 and executor != "ray"):
        raise ValueError(f"workers must be at least 1 (0 only with ray: as many as its CPUs), got {workers}")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
    if decoding is not None and not resume:
        decoding = decoding_setting(decoding)
    if engine is not None and not resume:
        engine = model_option("engine", engine, kv_cache=kv_cache, decoding=decoding)["kind"]
    done: dict[str, SampleResult] = {}
    if resume:
        row = store.find_eval(resume)
        if row is None:
            raise ResumeError(f"--resume {resume!r}: no such eval (toolpath eval list shows them)")
        if row["benchmark"] != get_benchmark(benchmark).name:
            raise ResumeError(f"--resume {row['id']}: that eval is of benchmark {row['benchmark']!r}, "
                              f"not {benchmark!r}")
        eval_id, params = row["id"], row["params"]
        limit, seed, data = params.get("limit"), params.get("seed", 0), params.get("data")
        scoring = params.get("scoring", "toolpath")
        kv_cache = params.get("kv_cache")
        decoding = params.get("decoding")  # like weights: the interrupted eval's
        weights = params.get("weights")  # the interrupted eval's, whatever this call says
        engine = params.get("engine")  # like weights
        agent_params = params.get("agent_params")
        categories = params.get("categories")
        model = row["model"] if params.get("model_given", True) else None
        done = {r["sample_id"]: SampleResult.from_row(r) for r in store.eval_samples(eval_id)}
    bench = get_benchmark(benchmark, data=data, categories=categories)
    records: list[Record] = list(bench.records(limit=limit, seed=seed))
    model_name = model or bench.model or "local"  # a benchmark's own default (dom, detector)
    if executor != "ray":  # a Ray cluster's workers may hold models this machine lacks
        check_model_available(model_name)
    if agent_params and records and not resume:
        check_agent_params(bench, records[0], agent_params)
    if not resume:
        eval_id = store.create_eval(bench.name, model_name, {
            "limit": limit, "seed": seed, "model_given": bool(model), "scoring": scoring,
            **({"kv_cache": kv_cache} if kv_cache else {}),
            **({"decoding": decoding} if decoding else {}),
            **({"weights": weights} if weights else {}),
            **({"engine": engine} if engine else {}),
            **({"agent_params": agent_params} if agent_params else {}),
            **({"categories": list(categories)} if categories else {}),
            **({"data": str(data)} if data else {})}, len(records))
    result = EvalResult(eval_id=eval_id, benchmark=bench.name, model=model_name,
                        overall_excludes=tuple(bench.overall_excludes), scoring=scoring, weights=weights,
                        aggregate=bench.aggregate)
    started = time.perf_counter()
    todo = [r for r in records if r.id not in done]
    adopted = adopt_runs(store, eval_id, {r.id for r in todo}) if resume else {}
    jobs = [{**_job(store, benchmark, data, r, model, eval_id, timeout, retries, adopted.get(r.id), scoring, weights),
             "kv_cache": kv_cache, "decoding": decoding, "agent_params": agent_params, "engine": engine,
             # the user's, never stored with the eval: a resumed eval reaches what its --allow-path says now
             "allow_paths": [str(p) for p in allow_paths or ()]} for r in todo]
    if executor == "ray":
        from .executors import run_ray

        stream = run_ray(jobs, workers)
    elif workers > 1 and len(jobs) > 1:
        from .executors import run_local

        stream = run_local(jobs, workers)
    else:
        from .executors import run_inline

        stream = run_inline(jobs, store, on_event)
    count = len(done)
    for _, sample in stream:
        store.put_eval_sample(eval_id, sample.sample_id, sample.run_id, sample.category, sample.status, sample.score,
                              sample.tokens, sample.seconds, sample.detail())
        done[sample.sample_id] = sample
        count += 1
        if on_sample:
            on_sample(count, len(records), sample)
    result.samples = [done[r.id] for r in records if r.id in done]
    abandon_left_behind(store, eval_id)
    result.closeness = runs_closeness(store, [s.run_id for s in result.samples if s.run_id])
    previous = (store.get_eval(eval_id) or {}).get("summary") or {}
    result.seconds = time.perf_counter() - started + float(previous.get("seconds") or 0.0)
    store.finish_eval(eval_id, result.summary())
    return result

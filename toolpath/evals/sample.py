"""One eval sample, start to end: the record's task as an episode, scored, measured, priced.

`run_sample(job, store)` is what every executor runs — in the eval's own process, in a local worker process,
or as a Ray task — so all three give the same results. A job is plain data (picklable, JSON-able):

    {"home": store folder, "benchmark": name, "data": path or None, "record": {"id", "category", "data"},
     "model": model string or None, "eval_id": id, "timeout": seconds or None, "retries": attempts,
     "run_id": a run of this sample that a killed eval left, to continue instead of starting over (or absent),
     "scoring": the scoring mode of the sample's score, "toolpath" or "official" (absent: "toolpath"),
     "weights": the model's options.weights for every task (--weights), or None,
     "kv_cache": the model's options.kv_cache for every task (--kv-cache), or None,
     "decoding": the model's options.decoding for every task (--decoding), or None,
     "agent_params": agent parameters set on every task (--agent-param), or None,
     "allow_paths": folders besides the data set's whose files its rows may name (--allow-path), or absent}

The sample's run is written to the store by the process that runs it; the eval's process stores the sample's
row (so one writer appends to eval_samples, and a killed eval keeps every row written). The run's spec names
its sample (metadata SAMPLE_KEY), so a resumed eval can find the run a kill left behind and adopt it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

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
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None  # None: the model has no price (evals/prices.py)
    retries: int = 0  # transient model errors retried
    timed_out: bool = False
    scores: dict[str, float] = field(default_factory=dict)  # scoring mode → score (both, whichever is `score`)
    weight: float = 1.0  # in the eval's weighted mean (benchmarks/base.py)
    weights: dict[str, float] = field(default_factory=dict)  # scoring mode → weight, where a mode weighs otherwise

    def detail(self) -> dict:
        """What the eval_samples row keeps beyond its columns."""
        d = asdict(self)
        for k in ("sample_id", "category", "run_id", "status", "score", "tokens", "seconds"):
            d.pop(k)
        for key in ("metrics", "scores"):
            if not d[key]:
                d.pop(key)
        if d["weight"] == 1.0:
            d.pop("weight")
        if all(w == 1.0 for w in d["weights"].values()):
            d.pop("weights")
        return d

    @classmethod
    def from_row(cls, row: dict) -> SampleResult:
        import json

        d = json.loads(row.get("detail") or "{}")
        known = {k: d[k] for k in ("answer", "error", "metrics", "tokens_in", "tokens_out", "cost_usd", "retries",
                                   "timed_out", "scores", "weight", "weights") if k in d}
        return cls(row["sample_id"], row["category"], row["run_id"], row["status"], row["score"], row["tokens"],
                   row["seconds"], **known)


SAMPLE_KEY = "eval_sample"  # in a run's spec metadata: the id of the sample the run is for

_BENCHES: dict[tuple, object] = {}  # per process: a benchmark may read its data files when made


def benchmark(name: str, data: str | None):
    key = (name, data)
    if key not in _BENCHES:
        _BENCHES[key] = get_benchmark(name, data=data)
    return _BENCHES[key]


def timed_out(job: dict, seconds: float) -> SampleResult:
    """The row of a sample whose worker was stopped at the eval's time limit."""
    rec = job["record"]
    return SampleResult(rec["id"], rec["category"], None, "failed", 0.0, 0, round(seconds, 3), timed_out=True,
                        error=f"time limit: stopped after {seconds:.0f} s (--timeout {job['timeout']:g})")


def crashed(job: dict, seconds: float, why: str) -> SampleResult:
    rec = job["record"]
    return SampleResult(rec["id"], rec["category"], None, "failed", 0.0, 0, round(seconds, 3),
                        error=f"the worker running it died: {why}")


def check_agent_params(bench, rec: Record, params: dict) -> None:
    """A ValueError naming what is wrong with `params` over the benchmark's own for its agent, before an eval
    starts (else every sample would fail with the same error)."""
    from ..agents import get_agent

    spec = bench.to_task(rec)
    spec.agent.params = {**spec.agent.params, **params}
    try:
        get_agent(spec.agent.name).check_spec(spec)
    except ValueError as err:
        raise ValueError(f"--agent-param: {err}") from None


def sample_spec(bench, rec: Record, job: dict):
    """The record's task as this eval runs it: named as the sample's, within the eval's time limit."""
    spec = bench.to_task(rec, model=job.get("model"))
    spec = spec.model_copy(deep=True, update={"metadata": {**spec.metadata, SAMPLE_KEY: rec.id}})
    if job.get("kv_cache"):  # `toolpath eval --kv-cache`: every sample's model runs with it
        spec.model.options["kv_cache"] = dict(job["kv_cache"])
    if job.get("decoding"):  # `toolpath eval --decoding`: every sample's model decodes with it
        spec.model.options["decoding"] = dict(job["decoding"])
    if job.get("agent_params"):  # `toolpath eval --agent-param`, over the benchmark's own params
        spec.agent.params = {**spec.agent.params, **job["agent_params"]}
    if job.get("weights"):  # the eval's --weights, in every task's model options
        spec.model.options = {**spec.model.options, "weights": job["weights"]}
    if job.get("engine"):  # the eval's --engine, likewise
        spec.model.options = {**spec.model.options, "engine": job["engine"]}
    if job.get("timeout"):  # the soft limit: the agent stops between steps; executors add a hard one
        spec.limits.max_seconds = min(spec.limits.max_seconds, float(job["timeout"]))
    return spec


def _episode(spec, store, job: dict, policy, on_event, reach=None):
    """The sample's episode: the run a killed eval left for it continued from its last checkpoint (or, if it
    had ended, taken as it is), else a new run, its files within `reach` (the data set's folders)."""
    from ..agents.episode import EpisodeError, resume_episode, run_episode

    left = job.get("run_id")
    if left:
        try:
            return resume_episode(left, store, on_event=on_event, policy=policy)
        except EpisodeError as err:
            store.abandon_run(left, f"eval {job['eval_id']} could not continue this run ({err}); it ran its sample "
                                    "again in a new run")
    return run_episode(spec, store, on_event=on_event, policy=policy, eval_id=job["eval_id"], reach=reach)


def run_sample(job: dict, store=None, on_event=None) -> SampleResult:
    """Run one job; opens the store at job["home"] unless the caller passes its own."""
    from ..agents import get_agent
    from ..agents.episode import EpisodeError
    from ..agents.events import Loading
    from ..policies.base import PolicyError, load, slow_to_load
    from ..policies.retry import RetryingPolicy
    from ..runs import open_store
    from .data_reach import data_reach
    from .prices import cost_usd, load_prices
    from .scoring import score_run

    if store is None:
        with open_store(Path(job["home"])) as own:
            return run_sample(job, own, on_event)
    bench = benchmark(job["benchmark"], job.get("data")).scored_as(job.get("scoring") or "toolpath")
    r = job["record"]
    rec = Record(r["id"], r["category"], r.get("data") or {})
    started = time.perf_counter()
    spec = sample_spec(bench, rec, job)
    policy = None
    try:
        agent = get_agent(spec.agent.name)
        if agent.needs_policy(agent.check_spec(spec)):
            if on_event is not None and slow_to_load(spec.model):
                on_event(Loading(spec.model.name).as_dict())
            policy = RetryingPolicy(load(spec.model), attempts=max(1, int(job.get("retries") or 1)))
        reach = data_reach(bench, job.get("data"), job.get("allow_paths") or ())  # a data set may come from anyone
        run = _episode(spec, store, job, policy, on_event, reach)
    except (EpisodeError, PolicyError, ValueError) as err:
        return SampleResult(rec.id, rec.category, None, "failed", 0.0, 0, round(time.perf_counter() - started, 3),
                            error=str(err), retries=getattr(policy, "retries", 0), cost_usd=0.0)  # never started
    scored = score_run(bench, rec, store, run.run_id, run.answer)
    value, metrics = scored.value, scored.metrics
    store.update_run(run.run_id, score=value)
    model = spec.model.name
    return SampleResult(rec.id, rec.category, run.run_id, run.status, value, run.tokens, run.seconds, run.answer,
                        run.error, metrics, tokens_in=run.tokens_in, tokens_out=run.tokens_out,
                        cost_usd=cost_usd(model, run.tokens_in, run.tokens_out, load_prices(Path(job["home"]))),
                        retries=getattr(policy, "retries", 0), scores=scored.scores, weight=scored.weight,
                        weights=scored.weights)

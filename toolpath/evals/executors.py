"""Where an eval's samples run: one after another here, in a pool of local worker processes, or on Ray.

Each executor takes the jobs (evals/sample.py) and yields (job, SampleResult) as samples finish, in finishing
order; the runner stores each at once. All three run the same `run_sample`, so they give the same results.

    inline   this process, one at a time (workers 1); the time limit is the agent's own (between steps)
    local    N worker processes (forked from a clean server process: no state shared with the eval's process). A sample
             past its time limit (plus a grace period) has its worker killed and replaced, and is stored as timed out; a
             worker that dies is replaced and its sample stored as failed, named. Workers die with the eval's process,
             even a kill -9 of it (see _die_with); the server and multiprocessing's resource tracker then exit on their
             own, as their last client is gone
    ray      a Ray task per sample on the cluster at $RAY_ADDRESS, or on a local Ray started for the eval;
             a task past its time limit is cancelled
"""

from __future__ import annotations

import os
import queue
import time
from collections import deque
from collections.abc import Callable, Iterator

from .sample import SampleResult, crashed, run_sample, timed_out

GRACE = 10.0  # seconds past the time limit before a worker is killed (the agent's own limit acts first)


def run_inline(jobs: list[dict], store, on_event=None) -> Iterator[tuple[dict, SampleResult]]:
    for job in jobs:
        yield job, run_sample(job, store, on_event=on_event)


def _worker(tasks, results, index: int, eval_pid: int | None = None) -> None:
    """A local worker: run jobs until told to stop (None)."""
    if eval_pid:
        _die_with(eval_pid)
    import langgraph.graph  # noqa: F401 — paid once per worker, before any job's time limit starts

    from ..agents import episode  # noqa: F401
    from ..runs import Store, open_store

    stores: dict[str, Store] = {}
    while True:
        job = tasks.get()
        if job is None:
            break
        try:
            _adopt_environment(job)
            key = (job["home"], os.environ.get("TOOLPATH_DB", ""))
            store = stores.get(key) or stores.setdefault(key, open_store(job["home"]))
            results.put((index, "started", None))  # the time limit counts from here, not from the worker's imports
            res = run_sample(job, store)
        except BaseException as err:  # noqa: BLE001 — a sample's crash is its failure, not the worker's
            res = SampleResult(job["record"]["id"], job["record"]["category"], None, "failed", 0.0, 0, 0.0,
                               error=f"{type(err).__name__}: {err}")
        results.put((index, "done", res))
    for s in stores.values():
        s.close()


def _die_with(pid: int) -> None:
    """End this process the moment process `pid` (the eval's) ends, however it ends.

    A worker's parent is multiprocessing's fork server, not the eval, so the kernel's parent-death signal
    (prctl PR_SET_PDEATHSIG) cannot say when the eval dies; a thread waiting on the eval's pidfd can, and a kill
    -9 of the eval runs no code of ours that could stop the workers. Each live worker keeps the fork server and
    the resource tracker alive (it holds their pipes), so once the workers are gone, they exit too.
    Without pidfd_open (not Linux, or Linux before 5.3) the thread polls the pid once a second instead."""
    import threading

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)  # it is gone already
    except (AttributeError, OSError):
        fd = None
    threading.Thread(target=_exit_when_gone, args=(pid, fd), name="toolpath-eval-watchdog", daemon=True).start()


def _exit_when_gone(pid: int, fd: int | None) -> None:
    import select
    import signal

    if fd is not None:
        waiter = select.poll()
        waiter.register(fd, select.POLLIN)
        while not waiter.poll():  # a pidfd is readable once its process has exited
            pass
    else:
        from ..runs import pid_alive

        while pid_alive(pid):
            time.sleep(1.0)
    # SIGKILL, not an exception or sys.exit: the main thread may be deep in an episode, and nothing it would
    # clean up is worth waiting for with nobody left to report to
    os.kill(os.getpid(), signal.SIGKILL)


def _adopt_environment(job: dict) -> None:
    """Take the eval's TOOLPATH_* variables and sys.path entries: a worker (or the forkserver it came from) may
    have started for an earlier eval of this process, under other settings."""
    import sys

    wanted = job.get("env") or {}
    for k in [k for k in os.environ if k.startswith("TOOLPATH_") and k not in wanted]:
        del os.environ[k]
    os.environ.update(wanted)
    for p in reversed(job.get("sys_path") or []):
        if p not in sys.path:
            sys.path.insert(0, p)


class _Slot:
    def __init__(self, ctx, results, index: int):
        self.tasks = ctx.Queue()
        self.proc = ctx.Process(target=_worker, args=(self.tasks, results, index, os.getpid()), daemon=True,
                                name=f"toolpath-eval-worker-{index}")
        self.proc.start()
        self.job: dict | None = None
        self.since: float | None = None  # when the worker began the job (None: not yet)

    def give(self, job: dict) -> None:
        self.job, self.since = job, None
        self.tasks.put(job)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)


def run_local(jobs: list[dict], workers: int, clock: Callable[[], float] = time.monotonic
              ) -> Iterator[tuple[dict, SampleResult]]:
    import multiprocessing

    # Workers fork from a fresh server process that imported the runtime once (forkserver), not from the eval's
    # process: no copies of its threads, sockets or SQLite handles, and no per-worker import of langgraph.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["langgraph.graph", "toolpath.agents.episode", "toolpath.evals.sample"])
    results = ctx.Queue()
    todo = deque(jobs)
    slots = [_Slot(ctx, results, i) for i in range(min(workers, len(jobs)) or 1)]
    try:
        while todo or any(s.job for s in slots):
            for s in slots:
                if s.job is None and todo:
                    s.give(todo.popleft())
            try:
                index, kind, res = results.get(timeout=0.5)
            except queue.Empty:
                pass
            else:
                slot = slots[index]
                if kind == "started":
                    slot.since = clock()
                else:
                    job, slot.job = slot.job, None
                    yield job, res
            for i, s in enumerate(slots):
                if s.job is None:
                    continue
                limit = s.job.get("timeout")
                late = bool(limit) and s.since is not None and clock() - s.since > float(limit) + GRACE
                if late or not s.proc.is_alive():
                    job, waited = s.job, clock() - (s.since or clock())
                    why = None if late else f"exit code {s.proc.exitcode}"
                    s.kill()
                    slots[i] = _Slot(ctx, results, i)
                    yield job, (timed_out(job, waited) if late else crashed(job, waited, why))
    finally:
        for s in slots:
            if s.proc.is_alive():
                s.tasks.put(None)
        for s in slots:
            s.proc.join(5)
            if s.proc.is_alive():
                s.kill()


def _ray_sample(job: dict) -> SampleResult:
    _adopt_environment(job)  # Ray reuses its worker processes across tasks and evals
    return run_sample(job)


def run_ray(jobs: list[dict], workers: int) -> Iterator[tuple[dict, SampleResult]]:
    """Ray tasks, at most `workers` at once (0: as many as the cluster's CPUs)."""
    try:
        import ray
    except ImportError:
        raise ValueError("--executor ray needs the ray package (pip install 'toolpath[cluster]')") from None
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started_here = not ray.is_initialized()
    if started_here:
        address = os.environ.get("RAY_ADDRESS") or None
        # the driver's own modules travel with each task, so workers import this toolpath, not another one
        # a cluster's workers write to the eval's store only if they are told where it is (TOOLPATH_DB)
        env = {k: os.environ[k] for k in ("TOOLPATH_DB", "TOOLPATH_PRICES") if os.environ.get(k)}
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 num_cpus=None if address else max(1, workers or os.cpu_count() or 1),
                 runtime_env={"env_vars": env} if env else None)
    task = ray.remote(num_cpus=1, max_retries=0)(_ray_sample)
    todo = deque(jobs)
    running: dict = {}
    try:
        while todo or running:
            while todo and (not workers or len(running) < workers):
                job = todo.popleft()
                running[task.remote(job)] = (job, time.monotonic())
            done, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in done:
                job, since = running.pop(ref)
                try:
                    yield job, ray.get(ref)
                except Exception as err:  # noqa: BLE001 — a task's crash is its sample's failure
                    yield job, crashed(job, time.monotonic() - since, f"{type(err).__name__}: {err}")
            for ref, (job, since) in list(running.items()):
                limit = job.get("timeout")
                if limit and time.monotonic() - since > float(limit) + GRACE:
                    ray.cancel(ref, force=True)
                    running.pop(ref)
                    yield job, timed_out(job, time.monotonic() - since)
    finally:
        for ref in running:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()

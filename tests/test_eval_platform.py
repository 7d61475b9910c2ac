"""The eval runner as a platform: kill and resume, parallel workers, Ray, time limits, retries, cost, eval list."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, toolpath_cli

from toolpath.evals import executors, runner
from toolpath.evals.runner import ResumeError, run_eval
from toolpath.runs import Store

ENV = {"PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}"}
SLOW = "python:helpers:SlowArithPolicy"


@pytest.fixture
def on_path(monkeypatch):
    """Worker processes import the test policies from tests/ (forked from a server that took the parent's sys.path)."""
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    monkeypatch.syspath_prepend(str(ROOT / "tests"))


def by_sample(store, eval_id):
    return {r["sample_id"]: (r["category"], r["status"], r["score"]) for r in store.eval_samples(eval_id)}


def test_an_eval_killed_halfway_resumes_to_the_numbers_of_an_uninterrupted_run(tmp_path, on_path):
    n = 80  # the second half takes seconds (two calls a sample at 0.05 s each): the kill lands before the end
    home = tmp_path / "home"
    cmd = [sys.executable, "-m", "toolpath.cli", "--home", str(home), "eval", "arith", "--limit", str(n),
           "--model", SLOW, "-q"]
    proc = subprocess.Popen(cmd, env={**os.environ, **ENV, "TOOLPATH_TEST_LATENCY": "0.05"}, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 240
        eval_id, stored = None, 0
        while time.time() < deadline and stored < n // 2:
            time.sleep(0.5)
            assert proc.poll() is None, proc.stderr.read().decode()
            with Store(home) as store:
                evals = store.list_evals()
                if evals:
                    eval_id, stored = evals[0]["id"], evals[0]["done"]
        assert eval_id and stored >= n // 2, "the eval did not get halfway in time"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with Store(home) as store:
        before = by_sample(store, eval_id)
        assert n // 2 <= len(before) < n and store.get_eval(eval_id)["finished"] is None
    r = toolpath_cli("--home", home, "eval", "arith", "--resume", eval_id, "--json", env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    resumed = json.loads(r.stdout)
    with Store(home) as store:
        after = by_sample(store, eval_id)
        runs = store.list_runs(limit=10_000, eval_id=eval_id)
    assert resumed["eval_id"] == eval_id and resumed["n"] == n and len(after) == n
    assert {k: after[k] for k in before} == before  # nothing finished was redone
    # one run per sample: the kill's was continued
    assert len(runs) == n and {r["status"] for r in runs} == {"finished"}
    # the same numbers as an uninterrupted eval of the same records
    with Store(tmp_path / "other") as store:
        whole = run_eval("arith", store, model=SLOW, limit=n).summary()
    assert resumed["score"] == whole["score"] == 1.0
    assert resumed["by_category"] == whole["by_category"]


def _descendants(pid: int) -> list[int]:
    """Every process below `pid`, found by walking /proc (each thread's children)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:  # gone meanwhile
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def _living(pids: list[int]) -> list[str]:
    """The command lines of those of `pids` that still run (a zombie waiting for its reaper runs nothing)."""
    out = []
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{p}/cmdline") as f:
                out.append(f"{p}: {f.read().replace(chr(0), ' ')[:120]}")
        except OSError:
            continue
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="walks /proc to find the eval's processes")
def test_kill_9_of_an_eval_takes_its_workers_with_it_and_resume_adopts_the_runs_it_left(tmp_path, on_path):
    n = 12
    home = tmp_path / "home"
    cmd = [sys.executable, "-m", "toolpath.cli", "--home", str(home), "eval", "arith", "--limit", str(n),
           "--model", SLOW, "--workers", "2", "-q"]
    proc = subprocess.Popen(cmd, env={**os.environ, **ENV, "TOOLPATH_TEST_LATENCY": "0.5"}, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, ready = time.time() + 120, False
        while time.time() < deadline and not ready:  # a sample stored, two more in flight in the workers
            time.sleep(0.2)
            assert proc.poll() is None, "the eval ended before it could be killed"
            with Store(home, readonly=True) as store:
                evals = store.list_evals()
                in_flight = ([r for r in store.unclaimed_runs(evals[0]["id"]) if r["status"] == "running"]
                             if evals else [])
            family = _descendants(proc.pid)
            ready = bool(evals) and evals[0]["done"] >= 1 and len(in_flight) == 2 and len(family) >= 4
        assert ready, "the eval never had a sample stored and two running"
    finally:
        proc.kill()
        proc.wait()
    eval_id = evals[0]["id"]
    # the fork server, both workers and the resource tracker go with it
    deadline = time.time() + 30
    while _living(family) and time.time() < deadline:
        time.sleep(0.1)
    assert _living(family) == []

    with Store(home) as store:
        left = {r["id"] for r in store.unclaimed_runs(eval_id) if r["status"] == "interrupted"}
    assert left, "the kill left no run behind"
    r = toolpath_cli("--home", home, "eval", "arith", "--resume", eval_id, "--workers", "2", "--json", env=ENV)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["n"] == n
    with Store(home) as store:
        rows = store.eval_samples(eval_id)
        runs = store.list_runs(limit=1000, eval_id=eval_id)
    assert len(rows) == n and len(runs) == n, [(x["id"], x["status"], x["error"]) for x in runs]  # one run per sample
    assert {row["run_id"] for row in rows} == {run["id"] for run in runs} >= left
    assert {run["status"] for run in runs} == {"finished"}


def test_a_resumed_eval_adopts_a_run_that_ended_unstored_and_abandons_one_no_sample_needs(tmp_path, on_path):
    with Store(tmp_path / "home") as store:
        first = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=3)
        eval_id = first.eval_id
        rows = store.eval_samples(eval_id)
        # killed after this sample's run finished, before its row was stored
        store._exec("DELETE FROM eval_samples WHERE eval_id = ? AND sample_id = ?", (eval_id, rows[0]["sample_id"]))
        # a worker killed while it ran a sample that was then stored from another run
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        stray = store.create_run(store.get_run(rows[1]["run_id"])["spec"], "t", "m", "react", eval_id=eval_id)
        store.update_run(stray, pid=dead.pid)
        assert store.get_run(stray)["status"] == "interrupted"
        again = run_eval("arith", store, resume=eval_id)
        after = {r["sample_id"]: r for r in store.eval_samples(eval_id)}
        runs = {r["id"]: r for r in store.list_runs(limit=100, eval_id=eval_id)}
    assert after[rows[0]["sample_id"]]["run_id"] == rows[0]["run_id"]  # adopted, not run a second time
    assert len(runs) == 4 and {r["status"] for i, r in runs.items() if i != stray} == {"finished"}
    assert runs[stray]["status"] == "abandoned" and "stored from another run" in runs[stray]["error"]
    assert again.summary()["score"] == first.summary()["score"] == 1.0 and len(again.samples) == 3


def test_resume_errors_name_the_eval(tmp_path):
    with Store(tmp_path / "home") as store:
        with pytest.raises(ResumeError, match="no such eval"):
            run_eval("arith", store, resume="e-nope")
        done = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=2)
        with pytest.raises(ResumeError, match="of benchmark 'arith', not 'mindcube'"):
            run_eval("mindcube", store, resume=done.eval_id)
        again = run_eval("arith", store, resume=done.eval_id)  # a finished eval: nothing to run, same summary
    assert again.summary()["score"] == done.summary()["score"] and len(again.samples) == 2


def test_local_workers_give_the_same_results_as_one_process(tmp_path, on_path):
    with Store(tmp_path / "home") as store:
        one = run_eval("arith", store, model=SLOW, limit=12, workers=1)
        four = run_eval("arith", store, model=SLOW, limit=12, workers=4)
        a, b = by_sample(store, one.eval_id), by_sample(store, four.eval_id)
        assert a == b and len(a) == 12
        # each worker wrote its own runs into the same store, tokens and cost included
        runs = store.list_runs(limit=100, eval_id=four.eval_id)
    assert len(runs) == 12 and all(r["status"] == "finished" for r in runs)
    assert four.summary()["tokens"] == one.summary()["tokens"] > 0


def test_a_hanging_episode_is_stopped_at_the_time_limit_and_the_rest_go_on(tmp_path, on_path, monkeypatch):
    monkeypatch.setattr(executors, "GRACE", 1.0)
    jobs = []
    with Store(tmp_path / "home") as store:
        for model in ("python:helpers:HangingPolicy", "python:helpers:ArithPolicy"):
            eval_id = store.create_eval("arith", model, {}, 1)
            jobs.append({"home": str(store.home), "benchmark": "arith", "data": None, "model": model,
                         "record": {"id": f"arith-0-00{len(jobs)}", "category": "add",
                                    "data": {"question": "What is 2 + 3?", "expression": "2 + 3", "answer": 5}},
                         "eval_id": eval_id, "timeout": 5.0, "retries": 1})
        t = time.time()
        results = {job["model"]: res for job, res in executors.run_local(jobs, workers=2)}
        # the killed worker's run belongs to no sample: the end of an eval marks it so, once, not interrupted
        runner.abandon_left_behind(store, jobs[0]["eval_id"])
        (left,) = store.list_runs(eval_id=jobs[0]["eval_id"])
    assert time.time() - t < 60
    hung = results["python:helpers:HangingPolicy"]
    assert hung.timed_out and hung.status == "failed" and "time limit" in hung.error
    assert results["python:helpers:ArithPolicy"].score == 1.0
    assert left["status"] == "abandoned" and "no sample of eval" in left["error"]


def test_transient_model_errors_are_retried_and_counted(tmp_path, on_path):
    with Store(tmp_path / "home") as store:
        res = run_eval("arith", store, model="python:helpers:FlakyArithPolicy", limit=3)
    s = res.summary()
    assert s["score"] == 1.0 and s["retries"] == 3 and [x.retries for x in res.samples] == [1, 1, 1]


def test_cost_per_sample_from_the_price_table_the_user_extends(tmp_path, on_path, monkeypatch):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"python:helpers:ArithPolicy": {"input": 1.0, "output": 2.0}}))
    monkeypatch.setenv("TOOLPATH_PRICES", str(prices))
    with Store(tmp_path / "home") as store:
        res = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=2)
        detail = json.loads(store.eval_samples(res.eval_id)[0]["detail"])
    # ArithPolicy: 30 tokens in, 13 out per episode
    assert detail["tokens_in"] == 30 and detail["tokens_out"] == 13
    assert detail["cost_usd"] == pytest.approx((30 * 1.0 + 13 * 2.0) / 1e6)
    assert res.summary()["cost_usd"] == pytest.approx(2 * (30 + 26) / 1e6)
    prices.write_text('{"python:helpers:ArithPolicy": {"input": "cheap"}}')
    with Store(tmp_path / "home") as store, pytest.raises(ValueError, match="prices.json: entry 'python:helpers"):
        run_eval("arith", store, model="python:helpers:ArithPolicy", limit=1)


def test_eval_list_shows_each_eval_with_its_progress(tmp_path, on_path):
    home = tmp_path / "home"
    r = toolpath_cli("eval", "arith", "--limit", "3", "--model", "python:helpers:ArithPolicy", "--json", home=home,
                     env=ENV)
    assert r.returncode == 0, r.stderr
    eval_id = json.loads(r.stdout)["eval_id"]
    with Store(home) as store:
        store.create_eval("arith", "local", {"limit": 9, "seed": 0}, 9)  # one that never finished
    rows = json.loads(toolpath_cli("eval", "list", "--json", home=home).stdout)
    assert [(x["benchmark"], x["n"], x["done"], x["finished"]) for x in rows] == [("arith", 9, 0, False),
                                                                                   ("arith", 3, 3, True)]
    assert rows[1]["id"] == eval_id and rows[1]["score"] == 1.0 and rows[1]["started"].startswith("20")
    assert rows[1]["scoring"] == "toolpath"
    text = toolpath_cli("eval", "list", home=home).stdout
    assert "0/9*" in text and "3/3" in text and "--resume" in text
    bad = toolpath_cli("eval", "arith", "--workers", "0", home=home)
    assert bad.returncode == 2 and "workers must be at least 1" in bad.stderr


@pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                    reason="ray is not installed (pip install 'toolpath[cluster]')")
def test_ray_on_a_local_instance_gives_the_same_results(tmp_path, on_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with Store(tmp_path / "home") as store:
        local = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=6)
        ray = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=6, executor="ray", workers=2)
        assert by_sample(store, ray.eval_id) == by_sample(store, local.eval_id)
    assert ray.summary()["score"] == 1.0


def test_agent_params_reach_every_task_and_resume_keeps_them(tmp_path, on_path):
    with Store(tmp_path / "home") as store:
        with pytest.raises(ValueError, match="--agent-param: agent.params.planner: agent 'react' has no option "
                                             "'planner'; its options: format, first_call, last_call; "
                                             "agent.params.note: "):
            run_eval("arith", store, model="python:helpers:ArithPolicy", limit=2,
                     agent_params={"planner": "x", "note": 1})
        with pytest.raises(ValueError, match="--agent-param: agent.params.format: unknown response format"):
            run_eval("arith", store, model="python:helpers:ArithPolicy", limit=2, agent_params={"format": "xml"})
        first = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=2, agent_params={"format": "json"})
        specs = [json.loads(store.get_run(s.run_id)["spec"]) for s in first.samples]
        lost = first.samples[0]  # as if the eval was killed before this sample ran: resume runs it anew
        store._exec("DELETE FROM eval_samples WHERE eval_id = ? AND sample_id = ?", (first.eval_id, lost.sample_id))
        store._exec("DELETE FROM steps WHERE run_id = ?", (lost.run_id,))
        store._exec("DELETE FROM runs WHERE id = ?", (lost.run_id,))
        again = run_eval("arith", store, resume=first.eval_id)
        rerun = [s for s in again.samples if s.sample_id == lost.sample_id][0]
        respec = json.loads(store.get_run(rerun.run_id)["spec"])
    assert specs and all(s["agent"]["params"] == {"format": "json"} for s in specs)
    assert rerun.run_id != lost.run_id and respec["agent"]["params"] == {"format": "json"}


def test_the_cli_parses_agent_params_and_names_a_bad_one(tmp_path, on_path):
    home = tmp_path / "home"
    r = toolpath_cli("eval", "arith", "--limit", "1", "--model", "python:helpers:ArithPolicy",
                     "--agent-param", "planner", home=home, cwd=ROOT, env=ENV)
    assert r.returncode == 2 and "--agent-param 'planner': expected KEY=VALUE" in r.stderr
    r = toolpath_cli("eval", "arith", "--limit", "1", "--model", "python:helpers:ArithPolicy",
                     "--agent-param", "format=xml", home=home, cwd=ROOT, env=ENV)
    assert r.returncode == 2 and "--agent-param: agent.params.format: unknown response format; expected one of " \
        "json, deepeyes (got 'xml')" in r.stderr and "Traceback" not in r.stderr
    r = toolpath_cli("eval", "arith", "--limit", "1", "--model", "python:helpers:ArithPolicy",
                     "--agent-param", "format=deepeyes", "--json", home=home, cwd=ROOT, env=ENV)
    assert r.returncode == 0, r.stderr
    with Store(home) as store:
        run = store.list_runs(limit=5)[0]
        assert json.loads(store.get_run(run["id"])["spec"])["agent"]["params"]["format"] == "deepeyes"

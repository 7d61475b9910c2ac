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
from toolpath.evals import executors
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
    n = 240
    home = tmp_path / "home"
    cmd = [sys.executable, "-m", "toolpath.cli", "--home", str(home), "eval", "arith", "--limit", str(n),
           "--model", SLOW, "-q"]
    proc = subprocess.Popen(cmd, env={**os.environ, **ENV, "TOOLPATH_TEST_LATENCY": "0.02"}, cwd=ROOT,
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
    finished_runs = [r for r in runs if r["status"] == "finished"]
    assert len(finished_runs) == n  # one finished run per sample: the killed one's run is left interrupted
    # the same numbers as an uninterrupted eval of the same records
    with Store(tmp_path / "other") as store:
        whole = run_eval("arith", store, model=SLOW, limit=n).summary()
    assert resumed["score"] == whole["score"] == 1.0
    assert resumed["by_category"] == whole["by_category"]


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
    assert time.time() - t < 60
    hung = results["python:helpers:HangingPolicy"]
    assert hung.timed_out and hung.status == "failed" and "time limit" in hung.error
    assert results["python:helpers:ArithPolicy"].score == 1.0


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
    text = toolpath_cli("eval", "list", home=home).stdout
    assert "0/9*" in text and "3/3" in text and "--resume" in text
    bad = toolpath_cli("eval", "arith", "--workers", "0", home=home)
    assert bad.returncode == 2 and "workers must be at least 1" in bad.stderr


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install 'toolpath[cluster]')")
def test_ray_on_a_local_instance_gives_the_same_results(tmp_path, on_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with Store(tmp_path / "home") as store:
        local = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=6)
        ray = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=6, executor="ray", workers=2)
        assert by_sample(store, ray.eval_id) == by_sample(store, local.eval_id)
    assert ray.summary()["score"] == 1.0

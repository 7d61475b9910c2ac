"""benchmarks/baselines.py without a model: its argument errors, the figures it reads back from the run store,
the page it writes, and what a failing, unavailable or interrupted row leaves."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bl():
    spec = importlib.util.spec_from_file_location("baselines_script", ROOT / "benchmarks" / "baselines.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


META = {"command": "python benchmarks/baselines.py --limit 3", "date": "2026-01-01T00:00:00+00:00",
        "machine": {"cores": 2, "platform": "Linux", "load_start": "0.50, 0.40, 0.30", "load_end": "0.90, 0.60, 0.40"},
        "packages": {"toolpath": "0.1.0"}, "engine": "onnxruntime", "weights": "int4", "limit": 3, "seed": 0,
        "scoring": "official", "timeout": 300.0, "wall_s": 1500.0, "running": False}


@pytest.mark.parametrize("argv, says", [
    (["--models", "nosuch"], "--models: unknown local text model 'nosuch'"),
    (["--benchmarks", "arith", "nosuch"], "--benchmarks: unknown 'nosuch'"),
    (["--limit", "0"], "--limit: expected a positive number"),
    (["--limit", "ten"], "--limit: expected a positive number"),
    (["--timeout", "-1"], "--timeout: expected a positive number"),
    (["--engine", "nosuch"], "--engine"),
    (["--weights", "int3"], "--weights: invalid choice"),
    (["--bfcl-category", "java"], "--bfcl-category: BFCL category 'java'"),
])
def test_a_bad_argument_is_one_error_naming_it_before_anything_runs(bl, argv, says, capsys, home):
    with pytest.raises(SystemExit) as exit_:
        bl.main(argv + ["--out", str(home / "page.md")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not (home / "page.md").exists()


def test_out_naming_a_folder_is_refused(bl, capsys, tmp_path):
    with pytest.raises(SystemExit):
        bl.main(["--out", str(tmp_path)])
    assert f"--out {tmp_path}: is a folder" in capsys.readouterr().err


def _sample(store, eval_id: str, i: int, score: float, prefill: int | None, reused: int | None, seconds: float,
            status: str = "finished", error: str | None = None) -> None:
    run = store.create_run("{}", f"t{i}", "local:m", "react", eval_id=eval_id)
    told = {} if prefill is None else {"prefill_tokens": prefill, "reused_tokens": reused}
    store.put_step(run, 1, "policy", {"messages": [], **told}, time.time(), 1.0)
    store.put_step(run, 2, "tools", {"messages": []}, time.time(), 0.1)
    store.put_step(run, 3, "policy", {"messages": [], **told}, time.time(), 1.0)
    store.put_eval_sample(eval_id, f"s{i}", run, "all", status, score, 10, seconds,
                          {"scores": {"official": score, "toolpath": score}, **({"error": error} if error else {})})


def test_a_rows_figures_are_read_from_the_store(bl, store):
    from toolpath.evals.intervals import bootstrap_ci

    eval_id = store.create_eval("arith", "local:m", {"scoring": "official"}, 4)
    scores = [1.0, 0.0, 1.0, 1.0]
    for i, (score, secs) in enumerate(zip(scores, [3.0, 9.0, 1.0, 5.0])):
        failed = i == 1
        _sample(store, eval_id, i, score, 100 + i, 50, secs, status="failed" if failed else "finished",
                error="the model said nothing" if failed else None)
    fig = bl.row_figures(store, eval_id)
    assert fig["n"] == 4 and fig["score"] == pytest.approx(0.75)
    assert fig["ci"] == pytest.approx(list(bootstrap_ci(scores)))  # the report's interval, not another
    assert fig["median_s"] == pytest.approx(4.0)
    assert fig["prefilled"] == pytest.approx(2 * (100 + 101 + 102 + 103) / 4)  # two policy steps per episode
    assert fig["reused"] == pytest.approx(100)
    assert fig["failed"] == 1 and fig["error"] == "the model said nothing"


def test_a_rule_based_policy_has_no_token_figures(bl, store):
    eval_id = store.create_eval("miniwob", "dom", {"scoring": "official"}, 2)
    for i in range(2):
        _sample(store, eval_id, i, 1.0, None, None, 0.5)
    fig = bl.row_figures(store, eval_id)
    assert fig["prefilled"] is None and fig["reused"] is None and fig["ci"] == [1.0, 1.0]


def _rows():
    return [
        {"benchmark": "arith", "model": "local:a", "status": "ran", "n": 3, "score": 2 / 3, "ci": [0.0, 1.0],
         "median_s": 12.345, "prefilled": 377.2, "reused": 1515.0, "failed": 1, "error": "x | y", "eval_id": "e1",
         "note": ""},
        {"benchmark": "arith", "model": "local:a", "status": "ran", "n": 3, "score": 1.0, "ci": [1.0, 1.0],
         "median_s": 0.01, "prefilled": None, "reused": None, "failed": 0, "error": None, "eval_id": "e2",
         "bound": "scripted", "note": ""},
        {"benchmark": "mindcube", "model": "local:a", "status": "not run", "error": "its data is not here: /x",
         "note": "sample"},
        {"benchmark": "bfcl/simple_python", "model": "local:a", "status": "failed", "error": "RuntimeError: boom",
         "note": ""},
        {"benchmark": "arith", "model": "local:b", "status": "interrupted", "note": ""},
        {"benchmark": "pope", "model": "local:tiny-vlm", "status": "not run", "note": "",
         "error": "local:tiny-vlm is not installed here (install: toolpath models build tiny-vlm)"},
    ]


def test_the_page_has_a_table_per_model_with_the_bound_beside_each_row(bl):
    page = bl.render_page(META, _rows())
    assert page.startswith("# Baselines")
    assert "`python benchmarks/baselines.py --limit 3`" in page and "2 cores" in page
    assert "0.50, 0.40, 0.30 at the start, 0.90, 0.60, 0.40 at the end; 25 min of wall time." in page
    assert "onnxruntime" in page and "int4" in page and "toolpath 0.1.0" in page
    sections = page.split("## ")
    assert [s.splitlines()[0] for s in sections[1:]] == ["local:a", "local:b", "local:tiny-vlm", "Upper bounds"]
    a = sections[1]
    arith = next(line for line in a.splitlines() if line.startswith("| arith "))
    assert "| 3 | 0.667 [0.000, 1.000] | 12.3 | 377 | 1515 | scripted: 1.000 [1.000, 1.000] |" in arith
    assert "1 of 3 episodes failed, e.g. x \\| y" in arith and "eval e1" in arith  # a | in an error stays in its cell
    assert "not run: its data is not here: /x" in a and "failed: RuntimeError: boom" in a
    assert "interrupted" in sections[2]
    assert "scripted: 1.000" in sections[2]  # the bound, run once, is beside every model's row
    assert "not run: local:tiny-vlm is not installed here" in sections[3]
    assert "| arith | scripted | 3 | 1.000 [1.000, 1.000] | 0.0 | eval e2 |" in sections[4]


def test_a_row_whose_data_is_missing_or_whose_eval_fails_says_so_and_the_run_goes_on(bl, store, monkeypatch, tmp_path):
    args = bl.parse_args(["--limit", "1", "--out", str(tmp_path / "p.md")])
    monkeypatch.setenv("TOOLPATH_MINDCUBE_DIR", str(tmp_path / "nowhere"))
    mindcube = bl.plans()["mindcube"][0]
    row = bl.run_row(bl.Job(mindcube, "local:x", None, "local:x", True), args, store)  # loads nothing
    assert row["status"] == "not run" and str(tmp_path / "nowhere") in row["error"]
    assert "TOOLPATH_MINDCUBE_DIR" in row["error"]
    broken = bl.Plan("broken", "no_such_benchmark")
    row = bl.run_row(bl.Job(broken, None, None, "local:x", False), args, store)
    assert row["status"] == "failed" and "no_such_benchmark" in row["error"]


def test_ctrl_c_keeps_every_finished_row_on_the_page(bl, monkeypatch, home, capsys):
    out = home / "results" / "page.md"
    done = []

    def fake_row(job, args, store):
        if len(done) == 2:
            raise KeyboardInterrupt
        done.append(job)
        return {**job.start(), "status": "ran", "n": 1, "score": 1.0, "ci": [1.0, 1.0], "median_s": 1.0,
                "prefilled": 10, "reused": 0, "failed": 0, "error": None, "eval_id": f"e{len(done)}"}

    monkeypatch.setattr(bl, "run_row", fake_row)
    code = bl.main(["--models", "qwen2.5-coder-0.5b", "--benchmarks", "arith", "bfcl", "--limit", "1",
                    "--out", str(out), "--json"])
    assert code == 130
    page = out.read_text()
    assert "eval e1" in page and "eval e2" in page and "interrupted (Ctrl-C)" in page
    assert [p.name for p in out.parent.iterdir()] == ["page.md"]  # written whole, no temporary left
    printed = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in printed["rows"]] == ["ran", "ran", "interrupted"]
    assert done[1].bound == "scripted"  # arith's bound right after its first row


def test_jobs_run_each_text_model_with_the_engine_and_the_vision_rows_once(bl, tmp_path):
    args = bl.parse_args(["--benchmarks", "miniwob", "pope", "--out", str(tmp_path / "p.md")])
    jobs = bl.jobs(args)
    assert [(j.plan.label, j.model, j.bound) for j in jobs] == [
        ("miniwob", "python:page_text:with_page__qwen2.5-coder-0.5b", None), ("miniwob", "dom", "dom"),
        ("miniwob", "python:page_text:with_page__qwen2.5-coder-1.5b", None), ("pope", "local:tiny-vlm", None)]
    assert [j.text_model for j in jobs] == [True, False, True, False]
    assert jobs[0].loads == "local:qwen2.5-coder-0.5b"

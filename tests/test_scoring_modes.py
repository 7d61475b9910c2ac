"""Scoring modes and weighted scores through a real eval: every sample scored in both modes, the chosen one as
its score, both in the summary, the JSON, the report; an eval resumed keeps its mode."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import ROOT, toolpath_cli

from toolpath.evals.benchmarks import SCORING_MODES, Record, check_scoring
from toolpath.evals.benchmarks.arith import Arith
from toolpath.evals.report import write_report
from toolpath.evals.runner import EvalResult, run_eval, weighted_score
from toolpath.evals.sample import SampleResult
from toolpath.runs import Store

PLUGIN = {"TOOLPATH_PLUGINS": "benchmark:two_mode_arith=helpers:TwoModeArith",
          "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}"}


@pytest.fixture
def plugin(monkeypatch):
    from toolpath import registry

    for k, v in PLUGIN.items():
        monkeypatch.setenv(k, v)
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    registry.reset()
    yield
    registry.reset()


def test_a_benchmark_in_the_other_mode_is_a_copy_and_a_bad_mode_is_named():
    bench = Arith()
    official = bench.scored_as("official")
    assert official is not bench and official.scoring == "official" and bench.scoring == "toolpath"
    assert official.scored_as("official") is official
    with pytest.raises(ValueError, match="scoring must be one of toolpath, official, got 'strict'"):
        bench.scored_as("strict")
    assert check_scoring("official") == "official" and SCORING_MODES == ("toolpath", "official")


def test_weighted_means_per_mode():
    samples = [SampleResult("a", "x", "r", "finished", 1.0, 0, 0, scores={"toolpath": 1.0, "official": 0.0}, weight=3,
                            weights={"toolpath": 3.0, "official": 1.0}),
               SampleResult("b", "x", "r", "finished", 0.0, 0, 0, scores={"toolpath": 0.0, "official": 1.0}),
               SampleResult("c", "y", "r", "failed", 0.0, 0, 0, weight=0)]  # never scored: no weight, no scores
    assert weighted_score(samples) == pytest.approx(3 / 4)
    assert weighted_score(samples, "official") == pytest.approx(1 / 2)  # official weighs "a" 1, not 3
    s = EvalResult("e", "b", "m", samples=samples).summary()
    assert s["score"] == pytest.approx(0.75) and s["scores"] == {"toolpath": 0.75, "official": 0.5}
    assert s["by_category"]["y"]["score"] == 0.0  # no weight at all: 0, not a division by zero
    assert weighted_score([]) == 0.0


def test_an_eval_stores_both_scores_and_shows_the_chosen_one(tmp_path, plugin):
    with Store(tmp_path) as store:
        res = run_eval("two_mode_arith", store, model="python:helpers:ArithPolicy", limit=4, scoring="official")
        s = res.summary()
        # four right answers; official: 1, 0, 1, 0 weighed 1, 3, 1, 3 → 2/8; toolpath: all 1 (weights 1, 2, 1, 2)
        assert s["scoring"] == "official" and s["score"] == 0.25
        assert s["scores"] == {"toolpath": 1.0, "official": 0.25}
        rows = store.eval_samples(res.eval_id)
        details = [json.loads(r["detail"]) for r in rows]
        assert [d.get("weight", 1.0) for d in details] == [1.0, 3.0, 1.0, 3.0]  # the eval's own mode's weight
        assert [d["weights"] for d in details if "weights" in d] == [{"toolpath": 2.0, "official": 3.0}] * 2
        assert [d["scores"] for d in details][:2] == [{"toolpath": 1.0, "official": 1.0},
                                                      {"toolpath": 1.0, "official": 0.0}]
        assert [r["score"] for r in rows] == [1.0, 0.0, 1.0, 0.0]
        again = run_eval("two_mode_arith", store, resume=res.eval_id)  # the stored mode, not the default
        assert again.summary()["scoring"] == "official" and again.summary()["score"] == 0.25
        out = write_report(store, [res.eval_id])
        text = Path(out["markdown"]).read_text()
        assert "score: official scoring" in text
        assert any(line.startswith("| **overall** | 4 | **0.250** |") and "| 0.250 | 1.000 |" in line
                   for line in text.splitlines())


def test_the_cli_takes_scoring_and_prints_both(tmp_path):
    home = tmp_path / "home"
    r = toolpath_cli("eval", "two_mode_arith", "--limit", "2", "--model", "python:helpers:ArithPolicy", "--json",
                     "--scoring", "official", home=home, env=PLUGIN)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["scoring"], out["scores"]) == ("official", {"toolpath": 1.0, "official": 0.25})
    assert out["by_category"] and all("scores" in v for v in out["by_category"].values())
    text = toolpath_cli("eval", "two_mode_arith", "--limit", "2", "--model", "python:helpers:ArithPolicy",
                        home=home, env=PLUGIN).stdout
    assert "scores are toolpath scoring; the same answers scored otherwise: official 0.250" in text
    bad = toolpath_cli("eval", "arith", "--scoring", "strict", home=home)
    assert bad.returncode == 2 and "invalid choice: 'strict'" in bad.stderr


def test_a_record_scored_in_both_modes_by_score_answer():
    from toolpath.evals.scoring import score_answer

    rec = Record("arith-0-001", "add", {"answer": 5})
    bench = Arith()
    got = score_answer(bench, rec, "5")
    assert got.value == 1.0 and got.scores == {"toolpath": 1.0, "official": 1.0}

"""BFCL through toolpath: the pinned bfcl-eval package's data, each item's functions as recording tools, the
react agent answering with a scripted model, and the package's own AST checker scoring the recorded calls
(the case table tests/data/scoring_cases/bfcl.json is checked by test_scoring_cases.py)."""

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by `make setup` (--no-deps)")

from toolpath.agents.episode import run_episode  # noqa: E402
from toolpath.evals.benchmarks import BenchmarkDataError, get_benchmark  # noqa: E402
from toolpath.evals.benchmarks import bfcl_data  # noqa: E402
from toolpath.evals.benchmarks.bfcl import BFCL  # noqa: E402
from toolpath.evals.benchmarks.bfcl_tools import tool_name  # noqa: E402
from toolpath.evals.scoring import score_answer  # noqa: E402
from toolpath.policies.scripted import ScriptedPolicy  # noqa: E402


@pytest.mark.parametrize("category", bfcl_data.CATEGORIES)
def test_each_category_loads_from_the_package_with_its_answers(category):
    items = bfcl_data.load(category)
    assert items and all(isinstance(item["function"], list) for item in items)
    if category in bfcl_data.AST_CATEGORIES:  # some live_irrelevance items offer no function at all
        assert all(item["function"] and item["ground_truth"] for item in items)


def test_a_category_toolpath_does_not_run_is_one_clear_error():
    with pytest.raises(BenchmarkDataError, match="multi_turn_base.*not one toolpath runs"):
        BFCL(categories="simple_python,multi_turn_base")


def calls(*pairs):
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def _run(store, bench, rec, script):
    spec = bench.to_task(rec, model="scripted:none.yaml")
    run = run_episode(spec, store, policy=ScriptedPolicy(script))
    return score_answer(bench, rec, run.answer), run


def _record(bench, item_id):
    return next(r for r in bench.records() if r.id == item_id)


def test_a_scripted_model_solves_a_simple_item_and_the_score_names_the_package_version(store):
    bench = get_benchmark("bfcl").__class__(categories="simple_python")
    rec = _record(bench, "simple_python_1")  # math.factorial, shown to the model as math_factorial
    spec = bench.to_task(rec)
    assert "math_factorial" in spec.tools
    score, run = _run(store, bench, rec, [calls(("math_factorial", {"number": 5}))])
    assert run.status == "finished" and score == 1.0 and score.scores == {"toolpath": 1.0, "official": 1.0}
    assert score.metrics[f"scorer:bfcl-eval {bfcl_data.version()}"] == 1.0
    # 5.0 for the integer 5: the package's checker refuses the type, a careful grader does not
    score, _ = _run(store, bench, rec, [calls(("math_factorial", {"number": 5.0}))])
    assert score.scores == {"toolpath": 1.0, "official": 0.0}


def test_a_parallel_item_is_one_response_with_every_call_in_any_order(store):
    bench = BFCL(categories="parallel")
    rec = next(iter(bench.records(limit=1)))
    truth = rec.data["ground_truth"]
    answer = [(tool_name(name), {k: next(v for v in vs if v != "") for k, vs in args.items() if vs != [""]})
              for entry in reversed(truth) for name, args in entry.items()]
    score, run = _run(store, bench, rec, [calls(*answer)])
    assert len(answer) > 1 and score.scores == {"toolpath": 1.0, "official": 1.0}, score.explanation
    score, _ = _run(store, bench, rec, [calls(*answer[:1]), calls(*answer[1:])])  # one call a step: its first
    assert score.scores == {"toolpath": 0.0, "official": 0.0}


def test_irrelevance_is_right_only_without_a_call(store):
    bench = BFCL(categories="irrelevance")
    rec = next(iter(bench.records(limit=1)))
    score, run = _run(store, bench, rec, ["None of the functions given can answer that."])
    assert run.status == "finished" and score.scores == {"toolpath": 1.0, "official": 1.0}
    fn = rec.data["function"][0]
    name = bench.to_task(rec).tools[0]
    assert name != "final_answer"
    score, _ = _run(store, bench, rec, [calls((name, {p: 1 for p in fn["parameters"].get("required", [])}))])
    assert score.scores == {"toolpath": 0.0, "official": 0.0}


def test_the_cli_runs_the_categories_it_is_given_and_resume_keeps_them(tmp_path, home, capsys):
    import json

    from conftest import write
    from toolpath import cli
    from toolpath.runs import Store

    # every item answered in plain text: right on irrelevance, wrong on any item that asks for a call
    script = write(tmp_path / "answers.yaml", json.dumps(["None of these functions applies."] * 8))
    code = cli.main(["eval", "bfcl", "--category", "irrelevance", "--category", "live_irrelevance,irrelevance",
                     "--limit", "4", "--model", f"scripted:{script}", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and set(out["by_category"]) == {"irrelevance", "live_irrelevance"}
    store = Store(home)
    assert store.find_eval(out["eval_id"])["params"]["categories"] == ["irrelevance", "live_irrelevance"]
    store.close()
    assert cli.main(["eval", "arith", "--category", "x", "--limit", "1"]) == 2
    assert "--category does not apply" in capsys.readouterr().err

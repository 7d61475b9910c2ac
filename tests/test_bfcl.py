"""BFCL through toolpath: the pinned bfcl-eval package's data, each item's functions as recording tools (or, in
the multi-turn categories, as calls that run on the package's backends), the react agent answering with a
scripted model, and the package's own checkers scoring the calls (the case table
tests/data/scoring_cases/bfcl.json is checked by test_scoring_cases.py)."""

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by `make setup` (--no-deps)")

from toolpath.agents.episode import run_episode  # noqa: E402
from toolpath.evals.benchmarks import (  # noqa: E402
    BenchmarkDataError,
    bfcl_data,  # noqa: E402
    get_benchmark,
)
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
    if category in bfcl_data.MULTI_TURN_CATEGORIES:  # every turn has its possible answer, every class its docs
        assert all(item["function"] and len(item["ground_truth"]) == len(item["question"]) for item in items)


def test_a_category_toolpath_does_not_run_is_one_clear_error():
    with pytest.raises(BenchmarkDataError, match="multi_turn_miss_func.*not one toolpath runs"):
        BFCL(categories="simple_python,multi_turn_miss_func")


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


# multi_turn_base_0: a file system; four turns (move a report, grep it, sort it, move and diff another)
SOLVED = [
    calls(("cd", {"folder": "document"}), ("mkdir", {"dir_name": "temp"})),
    calls(("mv", {"source": "final_report.pdf", "destination": "temp"})),
    "Moved it.",
    calls(("cd", {"folder": "temp"}), ("grep", {"file_name": "final_report.pdf", "pattern": "budget analysis"})),
    "Found the budget analysis.",
    calls(("sort", {"file_name": "final_report.pdf"})),
    "Sorted.",
    calls(("cd", {"folder": ".."}), ("mv", {"source": "previous_report.pdf", "destination": "temp"}),
          ("cd", {"folder": "temp"}),
          ("diff", {"file_name1": "final_report.pdf", "file_name2": "previous_report.pdf"})),
    "Here is the difference.",
]


@pytest.fixture(scope="module")
def multi_turn():
    bench = BFCL(categories="multi_turn_base")
    return bench, _record(bench, "multi_turn_base_0")


def _observations(store, run):
    return [m["content"] for st in store.steps(run.run_id) if st["node"] == "tools"
            for m in st["payload"]["messages"]]


def test_a_multi_turn_item_is_one_conversation_whose_calls_run_on_the_package_backend(store, multi_turn):
    bench, rec = multi_turn
    spec = bench.to_task(rec)
    assert spec.instruction.startswith("Move 'final_report.pdf'") and len(spec.followups) == 3
    assert {"cd", "mv", "grep", "post_tweet"} <= set(spec.tools) and "final_answer" not in spec.tools
    score, run = _run(store, bench, rec, SOLVED)
    assert run.status == "finished" and score.scores == {"toolpath": 1.0, "official": 1.0}, score.explanation
    assert score.metrics[f"scorer:bfcl-eval {bfcl_data.version()}"] == 1.0 and score.metrics["calls"] == 10
    seen = _observations(store, run)  # the backend's own results, the file's content included
    assert any("budget analysis" in o and "final report" in o for o in seen), seen
    assert any("moved to 'temp/final_report.pdf'" in o for o in seen), seen


def test_a_wrong_conversation_is_scored_wrong_by_the_package_checker(store, multi_turn):
    bench, rec = multi_turn
    # the report moved without the folder being made first: mv renames it to "temp", and the backend says so
    wrong = [calls(("cd", {"folder": "document"}), ("mv", {"source": "final_report.pdf", "destination": "temp"})),
             *SOLVED[2:]]
    score, run = _run(store, bench, rec, wrong)
    assert run.status == "finished" and score.scores == {"toolpath": 0.0, "official": 0.0}
    assert "multi_turn:instance_state_mismatch" in score.explanation
    # a conversation that stops before its last turn (the model's budget spent) is wrong, not an error
    assert bench.score(rec, None).value == 0.0 and "force_terminated" in bench.score(rec, None).explanation


def test_a_run_whose_backends_were_dropped_gets_them_back_by_replaying_its_calls(store, multi_turn, monkeypatch):
    from toolpath.evals.benchmarks import bfcl_multi_turn

    monkeypatch.setattr(bfcl_multi_turn, "RUNS", bfcl_multi_turn.Runs(keep=0))  # as if resumed elsewhere
    bench, rec = multi_turn
    score, run = _run(store, bench, rec, SOLVED)
    assert score.scores == {"toolpath": 1.0, "official": 1.0}, score.explanation


@pytest.mark.parametrize("change, named", [
    (lambda item: item.update(involved_classes=["GorillaFileSystem", "WebSearchAPI"]), "'WebSearchAPI' is not one"),
    (lambda item: item.update(involved_classes=[]), "involved_classes must be"),
    (lambda item: item.update(initial_config=["root"]), "initial_config must be an object"),
    (lambda item: item["initial_config"].update(GorillaFileSystem="root"), "initial_config['GorillaFileSystem']"),
    (lambda item: item.update(ground_truth=item["ground_truth"][:1]), "each of its 4 turns"),
])
def test_bad_multi_turn_data_is_one_error_naming_the_item(multi_turn, change, named):
    import copy

    item = copy.deepcopy({"id": multi_turn[1].id, **multi_turn[1].data})
    change(item)
    with pytest.raises(BenchmarkDataError, match="multi_turn_base_0") as err:
        bfcl_data.check_multi_turn(item)
    assert named in str(err.value)


def test_a_starting_state_the_backend_refuses_fails_before_the_episode_naming_the_item(multi_turn):
    import copy

    from toolpath.evals.benchmarks import Record

    bench, rec = multi_turn
    data = copy.deepcopy(rec.data)
    data["initial_config"]["GorillaFileSystem"] = {"root": {"workspace": {"type": "directory", "contents": 5}}}
    with pytest.raises(BenchmarkDataError, match=r"multi_turn_base_0: initial_config\['GorillaFileSystem'\]"):
        bench.to_task(Record(rec.id, rec.category, data))

"""Attacks from a model's calls in BFCL's multi-turn categories. The package's evaluation turns each call into
text and `eval`s it (multi_turn_utils.execute_multi_turn_func_call): a call name or an argument name is code
there. Each attack below runs through a real episode on the package's real backends and is then scored by the
package's real multi_turn_checker; none may run what the model wrote, and each must score as a wrong answer,
cleanly."""

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by `make setup` (--no-deps)")

from toolpath.agents.episode import run_episode  # noqa: E402
from toolpath.evals.benchmarks import bfcl_multi_turn_official as official  # noqa: E402
from toolpath.evals.benchmarks.bfcl import BFCL  # noqa: E402
from toolpath.evals.scoring import score_answer  # noqa: E402
from toolpath.policies.scripted import ScriptedPolicy  # noqa: E402


@pytest.fixture(scope="module")
def item():
    bench = BFCL(categories="multi_turn_base")
    return bench, next(r for r in bench.records() if r.id == "multi_turn_base_0")


def _attack(store, item, call: dict) -> tuple:
    bench, rec = item
    turns = len(rec.data["question"])
    script = [{"tool_calls": [call]}] + ["Done."] * turns  # the attack, then a reply that ends each turn
    run = run_episode(bench.to_task(rec, model="scripted:none.yaml"), store, policy=ScriptedPolicy(script))
    return run, score_answer(bench, rec, run.answer)


def _code(marker) -> str:
    return f"[open({str(marker)!r}, 'w')]"


@pytest.mark.parametrize("shape", ["comment", "operator", "value"])
def test_an_argument_name_that_is_code_runs_nothing(store, item, tmp_path, shape):
    marker = tmp_path / "pwned"
    # as the package writes a call, cd(<name>=<value>): each name below makes that text open a file (the
    # package's own execute_multi_turn_func_call does, on each)
    name = {"comment": f"folder='document')+{_code(marker)}#",
            "operator": f"folder='document')+{_code(marker)}+dict(x",
            "value": f"folder={_code(marker)} and 'document', x"}[shape]
    run, score = _attack(store, item, {"name": "cd", "arguments": {name: "x"}})
    assert run.status == "finished" and not marker.exists()
    assert score.scores == {"toolpath": 0.0, "official": 0.0} and score.explanation.startswith("multi_turn:")


@pytest.mark.parametrize("name, arguments", [
    ("open", {"file": "MARKER", "mode": "w"}),
    ("__import__", {"name": "os"}),
    ("exec", {"source": "open('MARKER', 'w')"}),
])
def test_a_call_of_a_function_the_item_does_not_have_runs_nothing(store, item, tmp_path, name, arguments):
    marker = tmp_path / "pwned"
    arguments = {k: v.replace("MARKER", str(marker)) for k, v in arguments.items()}
    run, score = _attack(store, item, {"name": name, "arguments": arguments})
    assert run.status == "finished" and not marker.exists()
    steps = [m for st in store.steps(run.run_id) if st["node"] == "tools" for m in st["payload"]["messages"]]
    assert "unknown tool" in steps[0]["content"]
    assert score.scores == {"toolpath": 0.0, "official": 0.0}
    # the checker's text for such a call: a name defined nowhere, the model's own never reaching `eval`
    assert official.call_text({"name": name, "arguments": arguments}, {"cd"}) == f"{official.UNKNOWN_FUNCTION}()"


def test_a_conversation_answer_that_is_not_one_is_scored_wrong(item):
    bench, rec = item
    for answer in (None, "", "not json", '{"turns": 5}', '{"turns": [{"steps": "x"}]}', "[" * 50_000):
        score = bench.score(rec, answer)
        assert score.value == 0.0 and "force_terminated" in score.explanation

"""The dag_math benchmark with a scripted solver, its --data reader, and `toolpath dag check` as a user runs it."""

from __future__ import annotations

import json
import re

import pytest
from conftest import toolpath_cli, write

from toolpath.cli import main
from toolpath.evals.benchmarks import BenchmarkDataError, Record, get_benchmark
from toolpath.evals.dag.problems import KINDS, problems
from toolpath.evals.runner import run_eval
from toolpath.policies.base import Response


def steps_json(*steps, fence=False):
    text = json.dumps([{"step_id": i, "edge": "follows", "direct_dependent_steps": uses, "content": c}
                       for i, uses, c in steps])
    return f"```json\n{text}\n```" if fence else text


def final(answer):
    return f"The final answer is $\\boxed{{{answer}}}$."


class DagSolver:
    """Answers each generated kind in its own way (`python:test_dag_math:DagSolver`), so every figure is known:
    shopping closed and right; speed right with a step nothing uses; equation closed and wrong; share right in
    prose, not the format; discount closed and right in a code fence."""

    ANSWERS = {p["problem"]: (p["kind"], p["answer"]) for p in problems(10)}

    def __init__(self, spec=None):
        self.name = "python:dag-solver"

    def respond(self, messages, tools, **gen):
        problem = re.findall(r"Problem: (.+)\nSolution:", messages[-1].content)[-1]
        kind, answer = self.ANSWERS[problem]
        reply = {
            "shopping": steps_json((1, None, "prices"), (2, None, "counts"), (3, [1, 2], "total"),
                                   (4, [3], final(answer))),
            "speed": steps_json((1, None, "legs"), (2, None, "an aside"), (3, [1], "rate"), (4, [3], final(answer))),
            "equation": steps_json((1, None, "equation"), (2, [1], "solved"), (3, [2], final("0"))),
            "share": f"The part left is {answer}, so {final(answer)}",
            "discount": steps_json((1, None, "price"), (2, [1], "cut"), (3, [2], "taxed"), (4, [3], final(answer)),
                                   fence=True),
        }[kind]
        return Response(text=reply, tokens_in=50, tokens_out=30)


def test_an_eval_reports_accuracy_validity_closeness_and_prr(store):
    result = run_eval("dag_math", store, model="python:test_dag_math:DagSolver", limit=5)
    s = result.summary()
    assert [x.status for x in result.samples] == ["finished"] * 5
    assert s["score"] == pytest.approx(4 / 5)  # plain accuracy: shopping, speed, share, discount
    assert s["metrics"] == pytest.approx({"correct": 0.8, "valid": 0.8, "closed": 0.6, "prr": 0.4,
                                          "closeness": round((1 + 2 / 3 + 1 + 1) / 4, 4)}, abs=1e-4)
    assert set(s["by_category"]) == set(KINDS)
    assert s["closeness"] == {"runs": 0, "mean": None, "closed": None}  # its runs call no tool
    speed = next(x for x in result.samples if x.category == "speed")
    assert speed.metrics["closed"] == 0.0 and speed.metrics["correct"] == 1.0


def test_the_task_asks_for_the_format():
    bench = get_benchmark("dag_math")
    records = list(bench.records(limit=5, seed=3))
    assert [r.category for r in records] == list(KINDS) and records == list(bench.records(limit=5, seed=3))
    spec = bench.to_task(records[0], model="scripted:x.yaml")
    assert spec.tools == [] and spec.model.max_new_tokens >= 1024
    assert "direct_dependent_steps" in spec.instruction and records[0].data["problem"] in spec.instruction
    assert "\\boxed" in spec.instruction


def test_score_explains_itself():
    bench = get_benchmark("dag_math")
    rec = Record("r", "share", {"answer": "17/28"})
    score = bench.score(rec, steps_json((1, None, "x"), (2, [1], final("\\frac{34}{56}"))))
    assert score == 1.0 and score.explanation.endswith("closed")
    score = bench.score(rec, "no idea")
    assert score == 0.0 and score.metrics == {"correct": 0.0, "valid": 0.0, "closed": 0.0, "prr": 0.0}
    assert "syntax" in score.explanation
    assert bench.scored_as("official").score(rec, final("17/28")).value == 1.0


def test_data_reads_the_official_formatted_set(tmp_path):
    rows = [{"problem_id": 3, "sample_id": 0, "domain": ["Mathematics -> Algebra"], "problem_text": "1+1?",
             "final_answer": "2", "steps": []},
            {"problem": "2+2?", "answer": 4, "difficulty": 2.5}]
    data = write(tmp_path / "set.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    records = list(get_benchmark("dag_math", data=data).records())
    assert [(r.id, r.category, r.data) for r in records] == [
        ("dag-math-3-0", "Mathematics", {"problem": "1+1?", "answer": "2"}),
        ("dag-math-line2", "difficulty 2.5", {"problem": "2+2?", "answer": "4"})]
    bad = write(tmp_path / "bad.jsonl", json.dumps(rows[0]) + "\n" + json.dumps({"problem_text": "x"}) + "\n")
    with pytest.raises(BenchmarkDataError, match=r"bad.jsonl:2: no final_answer"):
        list(get_benchmark("dag_math", data=bad).records())
    with pytest.raises(BenchmarkDataError, match="no such file"):
        list(get_benchmark("dag_math", data=tmp_path / "missing.jsonl").records())


# ---- toolpath dag check --------------------------------------------------------------------------------------

def test_dag_check_exit_codes_and_json(tmp_path):
    good = write(tmp_path / "good.json", steps_json((1, None, "a"), (2, [1], final("3")), fence=True))
    orphan = write(tmp_path / "orphan.json", steps_json((1, None, "a"), (2, None, "b"), (3, [1], final("3"))))
    broken = write(tmp_path / "broken.json", steps_json((1, [2], "a"), (2, [1], "b")))
    r = toolpath_cli("dag", "check", good, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"valid", "closed", "closeness", "violations", "answer", "depth", "width"} <= set(out)
    assert (out["valid"], out["closed"], out["answer"], out["depth"], out["width"]) == (True, True, "3", 2, 1)
    r = toolpath_cli("dag", "check", orphan)
    assert r.returncode == 0 and "valid, not closed" in r.stdout and "orphan: step 2" in r.stdout
    r = toolpath_cli("dag", "check", broken, "--json")
    kinds = {v["kind"] for v in json.loads(r.stdout)["violations"]}
    assert r.returncode == 1 and {"forward_reference", "cycle", "no_final_answer"} <= kinds


def test_dag_check_bad_input_is_one_line_naming_file_and_place(tmp_path, capsys):
    cases = {write(tmp_path / "a.json", '[{"step_id": 1,\n "content": }]'): "a.json: not JSON at line 2, column 13",
             tmp_path / "missing.json": "cannot read",
             tmp_path: "is not a regular file"}
    (tmp_path / "latin1.json").write_bytes(b'["caf\xe9"]')
    cases[tmp_path / "latin1.json"] = "is not UTF-8 text (byte 5)"
    for path, want in cases.items():
        code = main(["dag", "check", str(path)])
        err = capsys.readouterr().err
        assert code == 2 and want in err and "Traceback" not in err and err.count("\n") == 1, err


def test_dag_check_is_among_the_commands_the_startup_test_walks():
    from test_cli_startup import leaf_commands

    from toolpath.cli import build_parser

    assert ("dag", "check") in {words for words, _ in leaf_commands(build_parser())}


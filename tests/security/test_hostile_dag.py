"""Hostile DAG-MATH trajectories and hostile runs read as graphs. A trajectory file comes from anyone and a run's
steps hold model and tool output: `toolpath dag check` must answer each with its verdict or one line naming the
file (exit 2), never a traceback, a hang or output that grows with the attack; the graph of a run must stay
bounded and its drawing inert."""

from __future__ import annotations

import json
import os

import pytest

from toolpath.cli import main
from toolpath.evals.dag import check, read_trajectory
from toolpath.evals.dag.rules import MAX_EACH, MAX_RINGS
from toolpath.evals.dag.runs import MAX_NODES, run_graph
from toolpath.viewer.dag import section


def step(sid, uses, content="x"):
    return {"step_id": sid, "direct_dependent_steps": uses, "content": content}


def dag_check(capsys, path, *flags):
    code = main(["dag", "check", str(path), *flags])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, path, want):
    code, out, err = dag_check(capsys, path)
    assert code == 2 and want in err and str(path) in err, err
    assert "Traceback" not in err and err.count("\n") == 1 and out == ""


def test_files_that_are_not_trajectories_are_one_line_each(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    refused(capsys, deep, "nested too deeply")
    big = tmp_path / "big.json"
    big.write_text(json.dumps([step(1, None, "y" * 3_000_000)]))
    refused(capsys, big, "more than the 2000000")
    binary = tmp_path / "binary.json"
    binary.write_bytes(os.urandom(64) + b"\xff\xfe")
    refused(capsys, binary, "not UTF-8")
    nul = tmp_path / "nul.json"
    nul.write_text('[{"step_id": 1}]\x00junk')
    refused(capsys, nul, "not JSON at line 1")


@pytest.mark.timeout(60)
def test_a_fifo_or_a_folder_is_refused_without_waiting(tmp_path, capsys):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    refused(capsys, fifo, "not a regular file")
    refused(capsys, tmp_path, "not a regular file")


def test_terminal_escapes_in_steps_are_shown_not_sent(tmp_path, capsys):
    path = tmp_path / "escapes.json"
    path.write_text(json.dumps([step(1, None, "\x1b[2J\x1b]0;owned\x07"),
                                step(2, [1], "The final answer is $\\boxed{\x1b[31m4}$"), step(3, [9], "\u202e")]))
    code, out, _ = dag_check(capsys, path)
    assert code == 1 and "\x1b" not in out and "\u202e" not in out and "\\x1b[31m4" in out


def test_a_storm_of_rings_and_references_is_reported_in_bounded_lines(tmp_path, capsys):
    n = 5_000  # a chain, and its first step depending on every later one: thousands of rings, all back edges
    steps = [step(1, list(range(2, n + 1)))] + [step(i, [i - 1]) for i in range(2, n + 1)]
    steps += [step(n + 1, [n] + list(range(n + 2, n + 400)), "The final answer is $\\boxed{1}$.")]
    path = tmp_path / "storm.json"
    path.write_text(json.dumps(steps))
    code, out, _ = dag_check(capsys, path, "--json")
    report = json.loads(out)
    kinds = [v["kind"] for v in report["violations"]]
    assert code == 1 and kinds.count("cycle") <= MAX_RINGS
    assert kinds.count("forward_reference") == MAX_EACH + 1 and kinds.count("unknown_id") == MAX_EACH + 1
    assert report["violations"][kinds.index("forward_reference") + MAX_EACH]["detail"] == \
        f"and {n - 1 - MAX_EACH} more of this kind"
    assert max(len(v["detail"]) for v in report["violations"]) < 400  # a long ring is named by its first steps


def test_steps_of_every_wrong_type_are_named_not_crashed_on():
    junk = [None, [], "step", 1.5, {"step_id": True}, {"step_id": 1e309}, {"step_id": 2, "direct_dependent_steps": 3},
            {"step_id": 3, "direct_dependent_steps": [None, {"a": 1}], "content": ["x"]}, {"content": {"x": 1}}]
    got = check(read_trajectory(json.dumps(junk).replace("Infinity", "1e999")))
    assert not got.valid and sum(v.kind == "malformed" for v in got.violations) >= len(junk)


def hostile_run(n_results: int, size: int = 50) -> list[dict]:
    steps = [{"seq": 0, "node": "task", "payload": {"messages": "not a list"}}]
    for i in range(n_results):
        calls = [{"id": f"c{i}", "name": "search", "arguments": {"q": "<script>alert(1)</script>"}}, "junk", None]
        steps.append({"seq": 2 * i + 1, "node": "policy", "payload": {"raw": None, "messages": [
            {"role": "assistant", "content": "x", "tool_calls": calls}, "junk"]}})
        steps.append({"seq": 2 * i + 2, "node": "tools", "payload": {"observations": [
            {"call_id": f"c{i}", "tool": "search", "content": f"<script>alert({i})</script> " + "word " * size,
             "artifacts": ["junk", {"name": "</svg><img src=x onerror=alert(1)>"}] + [{"name": f"f{j}.png"}
                                                                                        for j in range(1_000)]},
            "junk"]}})
    steps.append({"seq": 9_999, "node": "policy", "payload": "not json at all"})
    return steps


def test_a_hostile_run_makes_a_bounded_graph_drawn_inert():
    graph = run_graph(hostile_run(MAX_NODES + 50))
    assert len(graph.nodes) == MAX_NODES + 1 and graph.truncated and graph.closeness is not None  # and the answer
    assert len(run_graph(hostile_run(2, size=200_000)).nodes[0].content) <= 100  # a label, not the result
    html = section(hostile_run(3))
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;alert(0)" in html
    assert html.count("<circle") == 4  # three results and the answer

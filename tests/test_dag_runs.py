"""Agent runs read as DAG-MATH graphs: which tool results later steps use, `runs show --dag`, and the closeness an
eval reports beside its score."""

from __future__ import annotations

import json
from urllib.request import urlopen

from conftest import toolpath_cli, write

from toolpath.cli import main
from toolpath.evals.dag.runs import closeness_text, run_graph, runs_closeness
from toolpath.evals.report import _markdown, eval_numbers
from toolpath.evals.runner import run_eval
from toolpath.viewer import serve


def task(instruction):
    return {"seq": 0, "node": "task", "payload": {"messages": [{"role": "user", "content": instruction}]}}


def policy(seq, text, *calls):
    return {"seq": seq, "node": "policy", "payload": {"raw": text, "messages": [
        {"role": "assistant", "content": text,
         "tool_calls": [{"id": f"c{seq}_{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(calls)]}]}}


def results(seq, *outs):
    """A tools step: outs are (tool, content) or (tool, content, artifacts), answering the previous policy step."""
    obs = [{"call_id": f"c{seq - 1}_{i}", "tool": o[0], "content": o[1], "artifacts": o[2] if len(o) > 2 else []}
           for i, o in enumerate(outs)]
    return {"seq": seq, "node": "tools", "payload": {"observations": obs}}


def test_results_used_later_are_parents_and_an_ignored_one_is_an_orphan():
    steps = [task("What is (17 + 4) * 3? Also look up the weather."),
             policy(1, "First the sum.", ("calculator", {"expression": "17 + 4"}), ("search", {"query": "weather"})),
             results(2, ("calculator", "21"), ("search", "Sunny with light winds over the northern hills today")),
             policy(3, "", ("calculator", {"expression": "21 * 3"})),
             results(4, ("calculator", "63.0")),
             policy(5, "The product is 63.", ("final_answer", {"answer": "63"})),
             results(6, ("final_answer", "63"))]
    graph = run_graph(steps)
    assert [(s.id, s.parents) for s in graph.nodes] == [(1, None), (2, None), (3, (1,)), (4, (3,))]
    assert graph.final.id == 4 and [s.id for s in graph.unused] == [2]
    assert graph.closeness == 0.666667 and not graph.closed
    text = "\n".join(graph.lines())
    assert "closeness 0.67 (1 result(s) never used)" in text and "[2] search: Sunny" in text and "(unused)" in text


def test_what_counts_as_appearing():
    def used(content, later_text, later_args, instruction="Do it.", artifacts=()):
        steps = [task(instruction), policy(1, "", ("tool", {"q": "ask"})),
                 results(2, ("tool", content, list(artifacts))),
                 policy(3, later_text, ("final_answer", {"answer": later_args}))]
        return run_graph(steps).closed

    assert used("1234.5", "so", "1,234.50")  # numbers as values
    assert used("7", "", "7")  # a lone small number counts when it is the whole result
    assert not used("It took 1 try and found nothing", "", "1")  # ...but not inside a text
    assert not used("17", "", "17", instruction="What is 17?")  # the task already said it
    assert used("The capital of Australia is Canberra", "I read that the capital of australia is canberra", "x")
    assert not used("Results for: ask", "", "ask")  # an echo of the call is no evidence either
    made = [{"name": "chart_1.png", "path": "/a/b.png", "sha256": "f" * 64}]
    assert used("saved", "", "see chart_1.png", artifacts=made)
    assert used("saved", "", "compare ffffffffffff", artifacts=made)  # by its digest
    assert not used("a long page about something else entirely", "", "unrelated")
    assert not used("it is a cat", "so it is a dog", "dog")  # three short common words are no evidence


def test_a_run_without_tool_results_has_no_closeness():
    graph = run_graph([task("Say hi."), policy(1, "hi")])
    assert graph.closeness is None and "no tool results" in graph.lines()[0]
    assert graph.to_json()["nodes"] == [{"id": 1, "parents": [], "label": "answer: hi", "step": "step 1"}]


TWO_STEPS = """
- 'Adding first. <tool_call>{"name": "calculator", "arguments": {"expression": "17 + 4"}}</tool_call>'
- '<tool_call>{"name": "calculator", "arguments": {"expression": "21 * 3"}}</tool_call>'
- text: The calculator says 63.
  tool_calls: [{name: final_answer, arguments: {answer: "63"}}]
"""


def test_runs_show_dag_on_a_scripted_run(tmp_path, home, capsys):
    write(tmp_path / "r.yaml", TWO_STEPS)
    spec = write(tmp_path / "task.yaml", f"id: dag-run\ninstruction: What is (17 + 4) * 3?\n"
                                         f"model: scripted:{tmp_path / 'r.yaml'}\ntools: [calculator, final_answer]\n")
    assert main(["run", str(spec), "--json", "-q"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    shown = toolpath_cli("runs", "show", run_id, "--dag", home=home)
    assert shown.returncode == 0, shown.stderr
    assert "reasoning graph: 3 nodes, closeness 1.00 (closed)" in shown.stdout
    assert "[2] calculator: 63  (step 4; uses 1)" in shown.stdout and "[3] answer: 63" in shown.stdout
    assert main(["runs", "show", run_id, "--dag", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["run_id"], data["closeness"], data["closed"], data["final"]) == (run_id, 1.0, True, 3)
    assert [n["parents"] for n in data["nodes"]] == [[], [1], [2]]
    server, url = serve(home, port=0)  # the viewer draws the same graph on the run's page
    try:
        page = urlopen(f"{url}runs/{run_id}", timeout=30).read().decode()
    finally:
        server.shutdown()
    assert "<h2>Reasoning graph</h2><p>Closeness 1.00 (closed)" in page and "<svg class=dag" in page
    assert page.count("<circle") == 3 and page.count("<path") == 2 and "[3] answer: 63" in page


def test_an_eval_reports_closeness_beside_its_score(store):
    result = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=2)
    summary = result.summary()
    assert summary["score"] == 1.0 and summary["closeness"] == {"runs": 2, "mean": 1.0, "closed": 1.0}
    assert store.get_eval(result.eval_id)["summary"]["closeness"] == summary["closeness"]
    numbers = eval_numbers(store, store.get_eval(result.eval_id))
    assert "closeness 1.000 over the 2 runs with tool results (100% closed" in _markdown([numbers], [], "now")
    assert runs_closeness(store, []) == {"runs": 0, "mean": None, "closed": None}
    assert closeness_text({"runs": "x"}).startswith("closeness: not readable")

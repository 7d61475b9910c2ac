"""`agent: graph`: a spec's own graph, checked when the spec loads (each error naming its node) and run with
conditional edges on the previous node's result."""

import pytest
from conftest import write

from toolpath.agents.episode import EpisodeError, run_episode
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.spec import SpecError, load_spec, parse_spec


def graph_spec(nodes, edges, **params):
    return {"id": "g", "instruction": "What is (17 + 4) * 3?", "model": "scripted:none.yaml",
            "agent": {"name": "graph", "params": {"nodes": nodes, "edges": edges, **params}}}


CALC = {"tool": "calculator", "arguments": {"expression": "(17 + 4) * 3"}}


def problems(data):
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    return str(err.value)


def test_a_graph_routes_on_the_previous_result_and_answers_with_the_last_one(store):
    spec = parse_spec(graph_spec(
        {"calc": CALC, "check": {"policy": "Is {calc} more than 50? Say big or small."},
         "big": {"tool": "calculator", "arguments": {"expression": "{calc} * 2"}},
         "small": {"policy": "Say it is small: {calc}"}},
        [{"from": "calc", "to": "check", "when": {"error": False}},
         {"from": "check", "to": "big", "when": {"contains": "big"}},
         {"from": "check", "to": "small"}]))
    r = run_episode(spec, store, policy=ScriptedPolicy(["It is big."]))
    assert (r.status, r.answer, r.steps) == ("finished", "126", 1)
    steps = store.steps(r.run_id)
    assert [(s["node"], s["payload"].get("graph_node")) for s in steps] == [
        ("task", None), ("tools", "calc"), ("policy", "check"), ("tools", "big")]
    assert steps[2]["payload"]["messages"][0]["content"] == "63"  # {last} was the input of the policy step
    r = run_episode(spec, store, policy=ScriptedPolicy(["small", "It is small."]))
    assert (r.status, r.answer, r.steps) == ("finished", "It is small.", 2)


def test_a_failed_node_takes_its_error_edge_or_fails_the_run(store):
    bad = {"tool": "calculator", "arguments": {"expression": "1 +"}}
    spec = parse_spec(graph_spec({"calc": bad, "fix": CALC}, [{"from": "calc", "to": "fix", "when": {"error": True}}]))
    assert run_episode(spec, store, policy=ScriptedPolicy([])).answer == "63"
    spec = parse_spec(graph_spec({"calc": bad}, []))
    r = run_episode(spec, store, policy=ScriptedPolicy([]))
    assert r.status == "failed" and "node 'calc' failed" in r.error


def test_a_cycle_with_an_exit_stops_by_its_condition_or_the_budget(store):
    spec = parse_spec(graph_spec({"ask": {"policy": "Say again or done."}},
                                 [{"from": "ask", "to": "ask", "when": {"equals": "again"}}], ),)
    r = run_episode(spec, store, policy=ScriptedPolicy(["again", "again", "done"]))
    assert (r.status, r.answer, r.steps) == ("finished", "done", 3)
    spec.limits.max_steps = 2
    r = run_episode(spec, store, policy=ScriptedPolicy(["again"] * 5))
    assert (r.status, r.steps) == ("budget_exhausted", 2)


def test_a_policy_node_may_use_its_own_model(tmp_path, store):
    write(tmp_path / "judge.yaml", "- 'yes'\n")
    data = graph_spec({"calc": CALC, "judge": {"policy": "Is {calc} right?", "model": "scripted:judge.yaml"}},
                      [{"from": "calc", "to": "judge"}])
    spec = load_spec(write(tmp_path / "g.yaml", __import__("yaml").safe_dump(data)))
    assert spec.agent.params["nodes"]["judge"]["model"]["name"] == f"scripted:{tmp_path / 'judge.yaml'}"
    r = run_episode(spec, store)
    assert (r.status, r.answer) == ("finished", "yes")


def test_each_kind_of_bad_graph_is_a_named_error_when_the_spec_loads():
    assert "agent.params.nodes: an agent: graph spec needs a mapping" in problems(graph_spec({}, []))
    assert "unknown node 'nowhere' (to)" in problems(graph_spec({"calc": CALC}, [{"from": "calc", "to": "nowhere"}]))
    assert "unknown node 'ghost' (from)" in problems(graph_spec({"calc": CALC}, [{"from": "ghost", "to": "calc"}]))
    assert "agent.params.start: unknown node 'x'" in problems(graph_spec({"calc": CALC}, [], start="x"))
    msg = problems(graph_spec({"calc": CALC, "lost": CALC}, []))
    assert "agent.params.nodes.lost" in msg and "unreachable node(s) lost" in msg
    msg = problems(graph_spec({"a": CALC, "b": CALC, "c": CALC},
                              [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}, {"from": "c", "to": "b"}]))
    assert "agent.params.nodes.b" in msg and "cycle with no exit through b, c" in msg
    msg = problems(graph_spec({"a": CALC}, [{"from": "a", "to": "a"}]))
    assert "cycle with no exit through a" in msg
    assert "must be exactly one of tool, agent, policy; it has tool, policy" in problems(
        graph_spec({"a": {**CALC, "policy": "hi"}}, []))
    assert "unknown key(s) prompt" in problems(graph_spec({"a": {"policy": "hi", "prompt": "x"}}, []))
    assert "when: expected one of" in problems(graph_spec({"a": CALC, "b": CALC},
                                                          [{"from": "a", "to": "b", "when": {"startswith": "x"}}]))
    assert "not a regular expression" in problems(graph_spec({"a": CALC, "b": CALC},
                                                             [{"from": "a", "to": "b", "when": {"matches": "("}}]))
    assert "agent.params.nodes.a.model" in problems(graph_spec({"a": {"policy": "hi", "model": "nosuchkind"}}, []))


def test_an_unknown_tool_or_agent_in_a_node_stops_the_run_before_it_starts(store):
    spec = parse_spec(graph_spec({"a": {"tool": "no_such_tool"}}, []))
    with pytest.raises(EpisodeError, match="agent.params.nodes.a: .*no_such_tool"):
        run_episode(spec, store, policy=ScriptedPolicy([]))
    spec = parse_spec(graph_spec({"a": {"agent": "nobody"}}, []))
    with pytest.raises(EpisodeError, match="agent.params.nodes.a: unknown agent 'nobody'"):
        run_episode(spec, store, policy=ScriptedPolicy([]))
    assert store.list_runs() == []

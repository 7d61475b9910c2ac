"""Graph specs (`agent: graph`) that loop for ever or name a bad model for a node: the user reads what the spec
did in toolpath's words, naming the nodes or the field, never LangGraph's or pydantic's error text."""

import json

import pytest
from conftest import write

from toolpath import cli
from toolpath.agents.episode import EpisodeError, run_episode
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.spec import TaskSpec, parse_spec

CALC = {"tool": "calculator", "arguments": {"expression": "(17 + 4) * 3"}}
FOREIGN = ("GraphRecursionError", "langchain", "Recursion limit", "pydantic", "validation error for", "errors.dev")


def graph(nodes, edges, **extra):
    return {"id": "g", "instruction": "x", "model": "scripted:none.yaml",
            "agent": {"name": "graph", "params": {"nodes": nodes, "edges": edges}}, **extra}


def assert_ours(text):
    assert not any(word in text for word in FOREIGN), text


@pytest.mark.parametrize("max_steps", [1, 3])
def test_a_loop_of_tool_nodes_ends_naming_its_nodes(max_steps, store):
    # each edge's condition always holds on 63: the loop has a way out on paper, never in this run
    spec = parse_spec(graph({"add": CALC, "check": CALC, "again": CALC},
                            [{"from": "add", "to": "check"},
                             {"from": "check", "to": "again", "when": {"contains": "63"}},
                             {"from": "again", "to": "check", "when": {"contains": "63"}}],
                            limits={"max_steps": max_steps}))
    r = run_episode(spec, store, policy=ScriptedPolicy([]))
    assert r.status == "budget_exhausted"
    assert_ours(r.error)
    assert "without reaching its end" in r.error and "'again' loops back to 'check'" in r.error
    assert "check -> again -> check" in r.error and "limits.max_steps" in r.error
    assert_ours(store.get_run(r.run_id)["error"])


def test_a_policy_nodes_bad_model_is_named_before_the_run_starts(store):
    bad = graph({"ask": {"policy": "hi", "model": {"name": "hf:/nowhere", "options": {"weights": "int3"}}}}, [])
    with pytest.raises(EpisodeError) as err:  # a spec built in Python, not read from a file
        run_episode(TaskSpec.model_validate(bad), store, policy=ScriptedPolicy([]))
    assert_ours(str(err.value))
    assert "agent.params.nodes.ask.model" in str(err.value) and "options.weights must be one of" in str(err.value)
    assert store.list_runs() == []


@pytest.mark.parametrize("model,words", [
    ({"name": "hf:x", "options": {"weights": "int3"}}, "options.weights must be one of"),
    ({"name": "hf:x", "options": {"kv_cache": "chanmix:9"}}, "kv_cache.bits"),
    ({"name": "hf:x", "temperature": 99}, "temperature"),
    ({"name": "nosuch:x"}, "unknown model kind"),
])
def test_a_spec_files_bad_node_model_is_refused_naming_the_field(model, words, tmp_path, home, capsys):
    path = write(tmp_path / "task.json", json.dumps(graph({"ask": {"policy": "hi", "model": model}}, [])))
    code = cli.main(["run", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert_ours(err)
    assert "agent.params.nodes.ask.model" in err and words in err, err


class _Spinner:
    """An agent whose graph turns in place and never counts a step: only LangGraph's recursion limit ends it."""
    name = "spinner"

    def build(self, rt, checkpointer=None):
        from langgraph.graph import StateGraph

        from toolpath.state import AgentState

        g = StateGraph(AgentState)
        g.add_node("spin", lambda state: {})
        g.set_entry_point("spin")
        g.add_edge("spin", "spin")
        return g.compile(checkpointer=checkpointer)


def test_any_agent_that_loops_past_langgraphs_limit_ends_in_our_words(store):
    from toolpath import registry
    from toolpath.agents.base import Agent

    spinner = type("Spinner", (_Spinner, Agent), {"needs_policy": lambda self, spec: False})()
    registry.add("agent", "spinner", spinner)
    try:
        r = run_episode(TaskSpec.model_validate({"id": "s", "instruction": "x", "agent": "spinner",
                                                 "limits": {"max_steps": 2}}), store, policy=ScriptedPolicy([]))
    finally:
        registry._table()["agent"].pop("spinner", None)
    assert r.status == "budget_exhausted"
    assert_ours(r.error)
    assert "node visits without finishing" in r.error and "limits.max_steps" in r.error
    assert_ours(store.get_run(r.run_id)["error"])

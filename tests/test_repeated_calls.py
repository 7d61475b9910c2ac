"""A repeated call of a pure tool is answered from what the run already has; a stateful tool runs every time."""

import pytest

from toolpath import registry
from toolpath.agents.episode import run_episode
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.spec import parse_spec
from toolpath.tools.registry import get_tool, tool

RAN: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def counting_tools():
    @tool(name="measure_twice", pure=True)
    def measure_twice(value: str, unit: str = "cm") -> str:
        """Measure a value: the same arguments always give the same result.

        Args:
            value: what to measure
            unit: the unit
        """
        RAN["measure_twice"] = RAN.get("measure_twice", 0) + 1
        if value == "broken":
            raise ValueError("cannot measure that")
        return f"{value} is 3 {unit}"

    @tool(name="look_again")
    def look_again(value: str) -> str:
        """Look at something that may have changed since the last look.

        Args:
            value: where to look
        """
        RAN["look_again"] = RAN.get("look_again", 0) + 1
        return f"look {RAN['look_again']} at {value}"

    yield
    for name in ("measure_twice", "look_again"):
        registry._provided["tool"].pop(name, None)  # the registry has no removal; a test cleans up its own


@pytest.fixture(autouse=True)
def fresh_counts():
    RAN.clear()


def call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def answer(a):
    return call("final_answer", answer=a)


def run(store, script, **limits):
    spec = parse_spec({"id": "t", "instruction": "Measure it.", "model": "scripted:none.yaml",
                       "tools": ["measure_twice", "look_again", "final_answer"],
                       "limits": {"loop_repeats": 5, **limits}})
    r = run_episode(spec, store, policy=ScriptedPolicy(script))
    observations = [o for s in store.steps(r.run_id) if s["node"] == "tools" for o in s["payload"]["observations"]]
    return r, observations


def test_a_repeated_pure_call_is_answered_without_running_it(store):
    # the second call writes the default out: as validated it is the same call
    script = [call("measure_twice", value="box"), call("measure_twice", value="box", unit="cm"), answer("3 cm")]
    r, obs = run(store, script)
    assert (r.status, r.answer) == ("finished", "3 cm")
    assert RAN["measure_twice"] == 1
    assert obs[0]["content"] == "box is 3 cm" and not obs[0].get("error")
    assert obs[1]["error"] and "you already called measure_twice with these arguments" in obs[1]["content"]
    assert "Answer now or call something else." in obs[1]["content"]


def test_other_arguments_and_failed_calls_run_again(store):
    script = [call("measure_twice", value="box"), call("measure_twice", value="box", unit="mm"),
              call("measure_twice", value="broken"), call("measure_twice", value="broken"), answer("done")]
    r, obs = run(store, script)
    assert r.status == "finished" and RAN["measure_twice"] == 4
    assert obs[1]["content"] == "box is 3 mm"
    assert [o.get("error", False) for o in obs[2:4]] == [True, True]
    assert all("cannot measure that" in o["content"] for o in obs[2:4])


def test_a_stateful_tool_runs_every_time(store):
    script = [call("look_again", value="screen"), call("look_again", value="screen"), answer("seen")]
    r, obs = run(store, script)
    assert r.status == "finished" and RAN["look_again"] == 2
    assert [o["content"] for o in obs[:2]] == ["look 1 at screen", "look 2 at screen"]


def test_the_loop_guard_still_ends_a_run(store):
    r, obs = run(store, [call("measure_twice", value="box")] * 10, loop_repeats=3)
    assert r.status == "looping" and r.steps == 3 and "3 times in a row" in r.error
    assert RAN["measure_twice"] == 1 and all(o["error"] for o in obs[1:])


def test_a_graphs_tool_nodes_run_each_time_they_are_reached(store):
    # the spec's author repeats the call by design (a loop of nodes); only a model's repeat is answered
    node = {"tool": "measure_twice", "arguments": {"value": "box"}}
    spec = parse_spec({"id": "g", "instruction": "x", "model": "scripted:none.yaml", "limits": {"max_steps": 3},
                       "agent": {"name": "graph", "params": {
                           "nodes": {"first": node, "second": node}, "edges": [{"from": "first", "to": "second"}]}}})
    r = run_episode(spec, store, policy=ScriptedPolicy([]))
    assert r.status == "finished", r.error
    assert RAN["measure_twice"] == 2


def test_analysis_tools_are_pure_and_stateful_ones_are_not():
    for name in ("calculator", "transcribe", "speech_features", "assess_quality", "molecule_info", "substructure"):
        assert get_tool(name).pure, name
    for name in ("python", "read_file", "final_answer", "crop"):
        assert not get_tool(name).pure, name


def test_last_call_makes_the_last_step_answer(store, tmp_path):
    """react's `last_call: final_answer`: the step that reaches max_steps is asked for an answer (tool_choice)."""
    from toolpath.policies.base import Response
    from toolpath.state import ToolCall

    class Caller:
        name = "caller"
        choices: list = []

        def respond(self, messages, tools, **generation):
            self.choices.append(generation.get("tool_choice"))
            if messages[-1].content == "This is your last step: call final_answer now.":
                return Response(text="", tool_calls=[ToolCall(id="a", name="final_answer", arguments={"answer": "3"})])
            return Response(text="", tool_calls=[ToolCall(id=f"c{len(self.choices)}", name="measure_twice",
                                                          arguments={"value": "box"})])

    spec = parse_spec({"id": "t", "instruction": "Measure it.", "model": "scripted:x", "limits": {"max_steps": 3},
                       "tools": ["measure_twice", "final_answer"],
                       "agent": {"name": "react", "params": {"first_call": "required", "last_call": "final_answer"}}},
                      base_dir=tmp_path)
    policy = Caller()
    r = run_episode(spec, store, policy=policy)
    assert (r.status, r.answer, r.steps) == ("finished", "3", 3)
    assert policy.choices == ["required", None, "required"]

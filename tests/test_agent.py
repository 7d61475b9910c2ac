"""The react loop end to end on a real SQLite store, with scripted policies standing in for the model."""

import pytest

from toolpath.agents.episode import EpisodeError, run_episode
from toolpath.policies.base import PolicyError, Response
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.spec import parse_spec


def spec(**kw):
    return parse_spec({"id": "t", "instruction": "What is 2+3?", "model": "scripted:none.yaml", **kw})


def calc(expr):
    return {"tool_calls": [{"name": "calculator", "arguments": {"expression": expr}}]}


def answer(a):
    return {"tool_calls": [{"name": "final_answer", "arguments": {"answer": a}}]}


def test_tool_then_answer_records_every_step(store):
    r = run_episode(spec(), store, policy=ScriptedPolicy([calc("2+3"), answer("5")]))
    assert (r.status, r.answer, r.steps) == ("finished", "5", 2)
    steps = store.steps(r.run_id)
    assert [s["node"] for s in steps] == ["task", "policy", "tools", "policy", "tools"]
    assert steps[2]["payload"]["observations"][0]["content"] == "5"
    run = store.get_run(r.run_id)
    assert run["status"] == "finished" and run["answer"] == "5" and run["steps"] == 2


def test_plain_text_reply_is_the_answer(store):
    r = run_episode(spec(), store, policy=ScriptedPolicy(["It is 5."]))
    assert (r.status, r.answer, r.steps) == ("finished", "It is 5.", 1)


def test_budget_guard_ends_the_run(store):
    script = [calc(f"{i}+1") for i in range(10)]
    r = run_episode(spec(limits={"max_steps": 3}), store, policy=ScriptedPolicy(script))
    assert r.status == "budget_exhausted" and r.steps == 3 and "max_steps=3" in r.error
    assert r.answer is None


def test_token_budget(store):
    script = [{**calc(f"{i}+1"), "tokens_in": 400, "tokens_out": 100} for i in range(10)]
    r = run_episode(spec(limits={"max_tokens": 1200}), store, policy=ScriptedPolicy(script))
    assert r.status == "budget_exhausted" and r.steps == 3 and "max_tokens" in r.error


def test_loop_guard_after_identical_calls(store):
    r = run_episode(spec(limits={"loop_repeats": 3}), store, policy=ScriptedPolicy([calc("1+1")] * 10))
    assert r.status == "looping" and r.steps == 3 and "3 times in a row" in r.error


def test_different_calls_do_not_trip_the_loop_guard(store):
    script = [calc("1+1"), calc("1+2"), calc("1+1"), answer("2")]
    r = run_episode(spec(limits={"loop_repeats": 2}), store, policy=ScriptedPolicy(script))
    assert r.status == "finished"


def test_malformed_call_is_reported_back_and_the_run_goes_on(store):
    script = ['<tool_call>{"name": "calculator", "arguments": {"expression": </tool_call>', calc("2+3"), answer("5")]
    r = run_episode(spec(), store, policy=ScriptedPolicy(script))
    assert r.status == "finished" and r.answer == "5"
    feedback = store.steps(r.run_id)[1]["payload"]["messages"][1]
    assert feedback["role"] == "user" and "not valid JSON" in feedback["content"]


def test_unknown_tool_and_bad_arguments_become_error_observations(store):
    script = [{"tool_calls": [{"name": "teleport", "arguments": {}}]},
              {"tool_calls": [{"name": "calculator", "arguments": {"expr": "1"}}]}, answer("ok")]
    r = run_episode(spec(), store, policy=ScriptedPolicy(script))
    assert r.status == "finished"
    obs = [s["payload"]["observations"][0] for s in store.steps(r.run_id) if s["node"] == "tools"]
    assert obs[0]["error"] and "unknown tool 'teleport'" in obs[0]["content"] and "calculator" in obs[0]["content"]
    assert obs[1]["error"] and "expr: unknown argument" in obs[1]["content"]


def test_tool_outside_the_allow_list_is_unknown(store):
    r = run_episode(spec(tools=["final_answer"]), store, policy=ScriptedPolicy([calc("1+1"), answer("x")]))
    obs = store.steps(r.run_id)[2]["payload"]["observations"][0]
    assert obs["error"] and "unknown tool 'calculator'" in obs["content"]


def test_calls_after_final_answer_are_not_run_and_say_so(store):
    both = {"tool_calls": [{"name": "final_answer", "arguments": {"answer": "5"}},
                           {"name": "calculator", "arguments": {"expression": "1"}}]}
    r = run_episode(spec(), store, policy=ScriptedPolicy([both]))
    assert r.answer == "5" and "not run: calculator" in r.error


class Failing:
    name = "failing"

    def respond(self, messages, tools, **gen):
        raise PolicyError("server said 500", transient=True)


def test_policy_error_fails_the_run_and_keeps_what_was_done(store):
    r = run_episode(spec(), store, policy=Failing())
    assert r.status == "failed" and "server said 500" in r.error
    assert store.get_run(r.run_id)["status"] == "failed"


def test_scripted_policy_running_out_is_a_clear_failure(store):
    r = run_episode(spec(), store, policy=ScriptedPolicy([calc("1+1")]))
    assert r.status == "failed" and "ran out of responses at turn 2" in r.error


def test_scripted_policy_answers_the_step_it_is_given():
    from toolpath.policies.base import PolicyError
    from toolpath.state import Message

    p = ScriptedPolicy([answer("one"), answer("two"), answer("three")])
    fresh = [Message(role="user", content="a prompt rebuilt for this step: no assistant turns in it")]
    assert p.respond(fresh, [], step=3).tool_calls[0].arguments == {"answer": "three"}
    assert p.respond(fresh, [], step=1).tool_calls[0].arguments == {"answer": "one"}
    # without a step (a judge asked once, outside an agent) the turn is counted from the conversation
    history = fresh + [Message(role="assistant", content="earlier")]
    assert p.respond(history, []).tool_calls[0].arguments == {"answer": "two"}
    for bad in (0, -1, "2", True):
        with pytest.raises(PolicyError, match="step must be a positive integer"):
            p.respond(fresh, [], step=bad)


def test_a_tool_that_chokes_on_its_arguments_is_an_observation_not_the_end_of_the_run(store):
    """A tool whose argument check was not written for hostile input (it raises TypeError, which pydantic passes
    through): the model is told, and the run goes on to its answer."""
    from pydantic import BaseModel, field_validator

    from toolpath import registry
    from toolpath.tools.registry import tool

    class Point(BaseModel):
        x: float

        @field_validator("x")
        @classmethod
        def near(cls, v: float) -> float:
            if abs(v) > 1e6:
                raise TypeError("too far")  # not ValueError: pydantic lets it through as it is
            return v

    @tool(name="go_to")
    def go_to(point: Point) -> str:
        """Go to a point.

        Args:
            point: where
        """
        return f"at {point.x}"

    try:
        script = [{"tool_calls": [{"name": "go_to", "arguments": {"point": {"x": 1e9}}}]}, answer("gave up")]
        r = run_episode(spec(tools=["go_to", "final_answer"]), store, policy=ScriptedPolicy(script))
        obs = [o for s in store.steps(r.run_id) if s["node"] == "tools" for o in s["payload"]["observations"]]
    finally:
        registry._provided["tool"].pop("go_to", None)  # the registry has no removal; a test cleans up its own
    assert r.status == "finished" and r.answer == "gave up"
    assert obs[0]["error"] and obs[0]["content"] == "go_to: TypeError: too far"


def test_unknown_agent_or_tool_fails_before_anything_is_stored(store):
    with pytest.raises(EpisodeError, match="unknown agent 'nope'"):
        run_episode(spec(agent="nope"), store, policy=ScriptedPolicy([]))
    with pytest.raises(EpisodeError, match="unknown tool 'warp'"):
        run_episode(spec(tools=["warp"]), store, policy=ScriptedPolicy([]))
    with pytest.raises(EpisodeError, match="sandbox 'vm' is not available; available: none, process, docker"):
        run_episode(spec(sandbox="vm"), store, policy=ScriptedPolicy([]))
    assert store.list_runs() == []


def test_checkpoints_are_lean_and_pruned_after_the_run(store):
    script = [calc(f"{i}+1") for i in range(20)] + [answer("done")]
    r = run_episode(spec(limits={"max_steps": 30}), store, policy=ScriptedPolicy(script))
    assert r.status == "finished"
    saver = store.checkpointer()
    rows = saver.conn.execute("SELECT COUNT(*), MAX(LENGTH(checkpoint)) FROM checkpoints WHERE thread_id = ?",
                              (r.run_id,)).fetchone()
    assert rows[0] == 1  # only the last one is kept once the run is over
    assert rows[1] < 2000  # the transcript is in the steps table, not in the checkpoint


def test_images_go_to_artifacts_not_the_state(store, tmp_path):
    from PIL import Image

    img = tmp_path / "cat.png"
    Image.new("RGB", (64, 48), "orange").save(img)  # a real image: specs refuse files that are not one
    s = parse_spec({"id": "t", "instruction": "Describe", "inputs": {"images": [str(img)]}, "model": "scripted:x"},
                   base_dir=tmp_path)
    seen = {}

    class Look:
        name = "look"

        def respond(self, messages, tools, **gen):
            seen["images"] = messages[1].images
            return Response(text="a cat")

    r = run_episode(s, store, policy=Look())
    assert r.answer == "a cat"
    ref = seen["images"][0]
    assert ref.mime == "image/png" and ref.size == img.stat().st_size and ref.path.startswith(str(store.artifact_dir))


def test_the_task_names_its_images_when_tools_can_take_them(store, tmp_path):
    from PIL import Image

    img = tmp_path / "room.png"
    Image.new("RGB", (32, 24), "grey").save(img)
    seen = []

    class Look:
        name = "look"

        def respond(self, messages, tools, **gen):
            seen.append(messages[1].content)
            return Response(text="done")

    for tools in (["crop", "final_answer"], []):
        s = parse_spec({"id": "t", "instruction": "Look", "inputs": {"images": [str(img)]}, "model": "scripted:x",
                        "tools": tools}, base_dir=tmp_path)
        run_episode(s, store, policy=Look())
    assert "image_1 (room.png)" in seen[0]
    assert seen[1] == "Look"  # no tool takes image names: the prompt is the instruction alone


class Buggy:
    """A policy with a bug (not a PolicyError): the run must fail cleanly and keep its completed steps."""

    name = "buggy"

    def __init__(self):
        self.calls = 0

    def respond(self, messages, tools, **gen):
        self.calls += 1
        if self.calls == 3:
            raise KeyError("oops")
        return Response(text="", tool_calls=[__import__("toolpath.state").state.ToolCall(
            id=f"c{self.calls}", name="calculator", arguments={"expression": f"{self.calls}+1"})])


def test_a_crash_inside_a_node_fails_the_run_and_keeps_completed_steps(store):
    r = run_episode(spec(), store, policy=Buggy())
    assert r.status == "failed" and "KeyError" in r.error
    nodes = [s["node"] for s in store.steps(r.run_id)]
    assert nodes == ["task", "policy", "tools", "policy", "tools"]  # the two finished steps are all there
    assert store.get_run(r.run_id)["status"] == "failed"


def test_step_rows_and_checkpoints_commit_together(store):
    from toolpath.state import initial_state

    r = run_episode(spec(), store, policy=ScriptedPolicy([calc("1+1"), calc("2+2"), answer("4")]))
    saver = store.checkpointer()
    tup = saver.get_tuple({"configurable": {"thread_id": r.run_id}})
    last_seq = tup.checkpoint["channel_values"]["seq"]
    assert last_seq == max(s["seq"] for s in store.steps(r.run_id)) == 6
    assert store._deferred == {}  # nothing left waiting for a commit
    assert set(initial_state()) <= set(tup.checkpoint["channel_values"])


def test_resume_refuses_a_run_that_is_still_running(store):
    from toolpath.agents.episode import resume_episode

    rid = store.create_run(spec().to_json(), "t", "scripted:x", "react")  # owned by this live process
    with pytest.raises(EpisodeError, match="still running in process"):
        resume_episode(rid, store, policy=ScriptedPolicy([]))


def test_the_caller_hears_each_step_as_a_typed_event_read_as_a_mapping(store):
    events = []
    r = run_episode(spec(), store, policy=ScriptedPolicy([calc("2+3"), "It is 5."]), on_event=events.append)
    assert [e["type"] for e in events] == ["start", "thinking", "policy", "tool", "thinking", "policy"]
    start, _, call, tool, _, last = events
    assert start == {"type": "start", "run_id": r.run_id, "model": "scripted:none.yaml", "agent": "react"}
    assert call["calls"] == ["calculator"] and call["issues"] == [] and "answer" not in call
    assert set(call) == {"type", "step", "seconds", "text", "tokens_in", "tokens_out", "calls", "issues"}
    assert (tool["tool"], tool["error"], tool["content"], tool["step"]) == ("calculator", False, "5", 1)
    assert last["answer"] == "It is 5." and last["step"] == 2

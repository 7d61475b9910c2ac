"""A task's follow-ups: the user's later turns, each sent when the model answers the one before; the run's answer
is then the whole conversation (toolpath/agents/user_turns.py), on a real store with a scripted model."""


import pytest

from toolpath.agents.episode import run_episode
from toolpath.agents.user_turns import read_conversation
from toolpath.policies.base import Response
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.spec import SpecError, parse_spec


class Listening(ScriptedPolicy):
    """The script's replies, keeping the last user message each call was answering."""

    def __init__(self, replies):
        super().__init__(replies)
        self.heard = []

    def respond(self, messages, tools, **kw) -> Response:
        self.heard.append([m.content for m in messages if m.role == "user"][-1])
        return super().respond(messages, tools, **kw)


def test_each_follow_up_arrives_after_the_model_answers_and_the_answer_is_every_turn(store):
    spec = parse_spec({"id": "t", "instruction": "What is 2+3?", "followups": ["And times 4?", "Thanks, bye."],
                       "model": "scripted:none.yaml"})
    policy = Listening(["5", {"tool_calls": [{"name": "calculator", "arguments": {"expression": "5*4"}}]},
                        "20", "Bye."])
    run = run_episode(spec, store, policy=policy)
    assert run.status == "finished" and run.steps == 4
    # the second turn is two steps (a call, then the reply), both answering "And times 4?"
    assert policy.heard == ["What is 2+3?", "And times 4?", "And times 4?", "Thanks, bye."]
    turns = read_conversation(run.answer)
    assert [t["reply"] for t in turns] == ["5", "20", "Bye."]
    assert turns[1]["steps"] == [[{"name": "calculator", "arguments": {"expression": "5*4"}}]]
    assert turns[0]["steps"] == turns[2]["steps"] == []


def test_without_follow_ups_the_reply_is_the_answer(store):
    run = run_episode(parse_spec({"id": "t", "instruction": "hi", "model": "scripted:none.yaml"}), store,
                      policy=ScriptedPolicy(["hello"]))
    assert run.answer == "hello" and read_conversation(run.answer) is None


def test_a_conversation_that_runs_out_of_steps_has_no_answer(store):
    spec = parse_spec({"id": "t", "instruction": "a", "followups": ["b", "c"], "limits": {"max_steps": 2},
                       "model": "scripted:none.yaml"})
    run = run_episode(spec, store, policy=ScriptedPolicy(["1", "2", "3"]))
    assert run.status == "budget_exhausted" and run.answer is None


@pytest.mark.parametrize("followups", ["just one string", [1, 2], [{"role": "user"}]])
def test_follow_ups_that_are_not_a_list_of_messages_are_a_spec_error(followups):
    with pytest.raises(SpecError) as err:
        parse_spec({"id": "t", "instruction": "a", "followups": followups})
    assert "followups" in str(err.value)

"""react's `first_call`: the first policy step is asked for a call (tool_choice), the later ones are not, and a
setting that names no tool of the task is refused before the run starts."""

from __future__ import annotations

import pytest

from toolpath.agents.episode import EpisodeError, run_episode
from toolpath.policies.base import Response
from toolpath.spec import parse_spec
from toolpath.state import ToolCall


class Recorder:
    """Calls the calculator once, then answers; keeps the tool_choice each step was given."""

    name = "recorder"

    def __init__(self):
        self.choices = []

    def respond(self, messages, tools, **generation):
        self.choices.append(generation.get("tool_choice"))
        if len(self.choices) == 1:
            return Response(text="", tool_calls=[ToolCall(id="c1", name="calculator",
                                                          arguments={"expression": "2+3"})])
        return Response(text="5")


def _spec(tmp_path, first_call, tools=("calculator", "final_answer")):
    return parse_spec({"id": "t", "instruction": "2+3?", "model": "scripted:x", "tools": list(tools),
                       "agent": {"name": "react", "params": {"first_call": first_call}}}, base_dir=tmp_path)


@pytest.mark.parametrize("first_call, forced", [("calculator", {"name": "calculator"}), ("required", "required"),
                                                ("auto", None)])
def test_only_the_first_step_is_forced(store, tmp_path, first_call, forced):
    policy = Recorder()
    assert run_episode(_spec(tmp_path, first_call), store, policy=policy).answer == "5"
    assert policy.choices == [forced, None]


def test_a_first_call_outside_the_tasks_tools_is_refused(store, tmp_path):
    with pytest.raises(EpisodeError, match=r"agent.params.first_call: 'read_file' is not one of auto, required, "
                                         r"calculator, final_answer"):
        run_episode(_spec(tmp_path, "read_file"), store, policy=Recorder())

"""The agent protocol and the step record: every registered agent is an Agent, and stored steps read back typed."""

from __future__ import annotations

import json

import pytest

from toolpath import registry
from toolpath.agents import get_agent
from toolpath.agents.base import Agent, AgentParams
from toolpath.state import StepRecord


def test_every_registered_agent_is_an_agent_named_as_registered():
    for name in registry.names("agent"):
        agent = get_agent(name)
        assert isinstance(agent, Agent) and agent.name == name
        assert issubclass(agent.Params, AgentParams) and isinstance(agent.default_tools, list)
        assert agent.initial_state()["status"] == "running"


def test_every_agents_params_are_one_typed_model_that_says_what_each_means():
    for name in registry.names("agent"):
        params = get_agent(name).Params
        assert params.model_config["extra"] == "forbid" and params.model_config["frozen"], name
        assert all(f.description for f in params.model_fields.values()), name
        assert set(get_agent(name).written_params) <= set(params.model_fields), name


def test_an_unknown_agent_names_the_choices():
    with pytest.raises(ValueError, match="unknown agent 'nope'; available: computer_use, embodied"):
        get_agent("nope")


def test_a_step_record_reads_a_stored_row_and_a_bad_one():
    row = {"seq": 3, "node": "finish", "started": 1.0, "seconds": 0.5, "tokens_in": 0, "tokens_out": 0,
           "payload": json.dumps({"messages": [{"role": "assistant", "content": "done"}], "final_state": {}})}
    s = StepRecord.from_row(row)
    assert (s.seq, s.node, s.messages[0]["content"]) == (3, "finish", "done")
    assert s.has("final_state") and s.final_state == {} and s.raw is None and s.issues == [] and s.observations == []
    bad = StepRecord.from_row({**row, "payload": "{not json"})
    assert bad.payload == "{not json" and bad.messages == [] and not bad.has("final_state")
    assert bad.to_json()["payload"] == "{not json"

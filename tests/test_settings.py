"""policies/settings.py: a model's kind options validated once into their kinds' Options, every field named as a
spec writes it, a graph node's own model included, and the rules between settings (torch-only options)."""

from __future__ import annotations

import pytest

from toolpath import kinds
from toolpath.policies.settings import model_settings, settled
from toolpath.spec import ModelSpec, TaskSpec


def task(**model):
    return TaskSpec.model_validate({"id": "t", "instruction": "x", "model": {"name": "local", **model}})


def test_validated_once_then_remembered(monkeypatch):
    calls = []
    real = kinds.options
    monkeypatch.setattr(kinds, "options", lambda *a, **k: calls.append(a[0].name) or real(*a, **k))
    spec = settled(task(options={"kv_cache": "quest:64"}))
    assert calls == ["quest"]
    setting = model_settings(spec.model).kv_cache  # what policies.load and the backend ask: no second validation
    assert calls == ["quest"] and setting.kind == "quest" and setting.options.budget == 64
    assert spec.model.options["kv_cache"] == {"kind": "quest", "budget": 64, "page_size": 16, "dense_layers": 2}
    spec.model.options["kv_cache"] = "quest:128"  # options changed after: validated again, not the old answer
    assert model_settings(spec.model).kv_cache.options.budget == 128 and calls == ["quest", "quest"]


def test_a_graph_nodes_own_model_is_checked_and_written_out():
    nodes = {"ask": {"policy": "hi", "model": {"name": "local", "options": {"kv_cache": "kivi:4"}}},
             "plain": {"policy": "hi", "model": "scripted:r.yaml"}}
    graph = {"name": "graph", "params": {"nodes": nodes, "edges": [{"from": "ask", "to": "plain"}]}}
    spec = settled(TaskSpec.model_validate({"id": "t", "instruction": "x", "agent": graph}))
    assert spec.agent.params["nodes"]["ask"]["model"]["options"]["kv_cache"]["residual"] == 32
    assert spec.agent.params["nodes"]["plain"]["model"] == "scripted:r.yaml"
    nodes["ask"]["model"]["options"]["kv_cache"] = "kivi:3"
    with pytest.raises(ValueError, match=r"^agent\.params\.nodes\.ask\.model\.options\.kv_cache\.bits: "):
        settled(TaskSpec.model_validate({"id": "t", "instruction": "x", "agent": graph}))


@pytest.mark.parametrize("options, says", [
    ({"engine": "onnxruntime", "kv_cache": "kivi:4"},
     "model.options.kv_cache needs options.engine torch; options.engine is onnxruntime"),
    ({"kv_cache": {"kind": "kivi"}, "decoding": {"kind": "vcd", "alpha": -1}}, "model.options.decoding.alpha: "),
    ({"kv_cache": "kivi:"}, "model.options.kv_cache.bits: "),
])
def test_problems_name_the_field(options, says):
    with pytest.raises(ValueError, match="^" + says.replace(".", r"\.")):
        model_settings(ModelSpec(name="local", options=options))


def test_the_spec_itself_checks_only_names():
    with pytest.raises(ValueError, match=r"kv_cache\.kind: unknown kind 'lru'"):
        task(options={"kv_cache": "lru:4"})
    assert task(options={"kv_cache": "kivi:3"}).model.options["kv_cache"] == "kivi:3"  # its options: later, once

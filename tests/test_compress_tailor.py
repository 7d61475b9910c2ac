"""`tailor` (GPTailor layer tailoring) on a tiny random Llama saved as a folder and named `hf:DIR`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("optuna")

from toolpath import kinds  # noqa: E402
from toolpath.compress import tailor, tailor_layers  # noqa: E402
from toolpath.compress.tailor_finetune import default_candidates  # noqa: E402
from toolpath.compress.tailor_layers import Composer, Plan, Workbench  # noqa: E402
from toolpath.spec import ModelSpec  # noqa: E402

LAYERS = 8


def _tokenizer():
    from pydoc_data.topics import topics

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = [topics[k] for k in sorted(topics)[:120]] + ['<tool_call>{"name": "calculator", "arguments": '
                                                       '{"expression": "12 * 7"}}</tool_call> 0123456789']
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=2000, special_tokens=["<eos>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<eos>")


def _perturbed(model, seed: int):
    """A stand-in for a fine-tune: the same model with every decoder-layer weight nudged."""
    import copy

    gen = torch.Generator().manual_seed(seed)
    out = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in out.named_parameters():
            if ".layers." in name:
                p.add_(torch.randn(p.shape, generator=gen) * 0.02)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    tok = _tokenizer()
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg).eval()
    root = tmp_path_factory.mktemp("tailor")
    base_dir = root / "base"
    model.save_pretrained(base_dir)
    tok.save_pretrained(base_dir)
    cands = []
    for k in (1, 2):
        d = root / f"cand{k}"
        _perturbed(model, k).save_pretrained(d)
        tok.save_pretrained(d)
        cands.append(d)
    return {"dir": base_dir, "model": model, "tok": tok, "cands": cands, "root": root}


def _lines():
    out: list[str] = []
    return out, out.append


def _tailor(source: str, out: Path, options: dict[str, str], log=None) -> dict:
    """The tailor kind run as `toolpath compress --method tailor --option ...` runs it: options validated first."""
    return tailor.KIND.compress(source, out, options=kinds.options(tailor.KIND, options, "compress"), log=log)


def test_tailor_removes_the_target_and_writes_a_loadable_folder(tiny, tmp_path, capsys):
    from toolpath.policies.hf import HFPolicy
    from toolpath.state import Message

    out = tmp_path / "out"
    _, log = _lines()
    opts = {"remove": "2", "trials": "6", "seed": "1", "calib_blocks": "1",
            "candidates": ",".join(str(c) for c in tiny["cands"])}
    info = _tailor(f"hf:{tiny['dir']}", out, opts, log)
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == LAYERS - 2
    assert info["layers"]["after"] == LAYERS - 2 and len(info["layers"]["removed"]) == 2
    assert len(info["per_layer"]) == LAYERS - 2 and len(info["trials"]) == 6
    assert {t["stage"] for t in info["trials"]} == {"layers", "merge", "scale"}
    assert info["objective"]["best"] == max(t["value"] for t in info["trials"])
    json.dumps(info)  # JSON-able
    assert "tailoring search" in capsys.readouterr().err  # its progress, on stderr
    policy = HFPolicy.from_spec(ModelSpec(name=f"hf:{out}", max_new_tokens=5))
    assert len(policy.model.model.layers) == LAYERS - 2
    reply = policy.respond([Message(role="user", content="What is 2 + 3?")], [])
    assert reply.tokens_out > 0


def test_keep_share_and_default_candidates_are_made_and_cached(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    opts = {"keep": "0.75", "trials": "3", "finetune_steps": "1", "calib_blocks": "1"}
    info = _tailor(f"hf:{tiny['dir']}", tmp_path / "a", opts, lambda _t: None)
    assert info["layers"]["after"] == 6
    made = sorted((tmp_path / "home" / "models").glob("tailor-*"))
    assert [p.name.split("-")[-2] for p in made] == ["english", "toolcalls"]
    lines, log = _lines()
    again = default_candidates(tiny["model"], tiny["tok"], "hf:" + str(Path(tiny["dir"]).resolve()), 1, 0, log)
    assert again == made and sum("cached" in line for line in lines) == 2  # nothing is fine-tuned twice


def test_output_scale_zero_makes_a_layer_the_identity(tiny):
    base = tiny["model"]
    composer = Composer(base, [])
    model = Workbench(composer).model(Plan(keep=list(range(LAYERS)), scale={3: 0.0, 5: 0.5}))
    seen = {}
    layer = model.model.layers[3]

    def grab_in(_module, args, kwargs):
        seen["in"] = (args[0] if args else kwargs["hidden_states"]).clone()

    def grab_out(_module, _args, output):
        seen["out"] = (output[0] if isinstance(output, tuple) else output).clone()

    hooks = [layer.register_forward_pre_hook(grab_in, with_kwargs=True), layer.register_forward_hook(grab_out)]
    with torch.no_grad():
        model(torch.tensor([[5, 9, 17, 33, 2]]))
    for h in hooks:
        h.remove()
    assert torch.allclose(seen["in"], seen["out"], atol=0)
    # scale 0.5 halves the layer's output projections, and nothing else in it
    w = composer.layer(5, [], 0.5)
    ref = tailor_layers.layer_params(base)[5]
    for k, v in w.items():
        factor = 0.5 if ("o_proj" in k or "down_proj" in k) else 1.0
        assert torch.allclose(v, ref[k] * factor)


def test_merge_scale_zero_and_one_give_the_base_and_the_candidate(tiny):
    from transformers import AutoModelForCausalLM

    base = tiny["model"]
    cands = [AutoModelForCausalLM.from_pretrained(str(p)).eval() for p in tiny["cands"]]
    composer = Composer(base, cands)
    want = tailor_layers.layer_params(cands[1])[2]
    for k, v in composer.layer(2, [0.0, 1.0], 1.0).items():
        assert torch.allclose(v, want[k], atol=1e-6)
    for k, v in composer.layer(2, [0.0, 0.0], 1.0).items():
        assert torch.equal(v, tailor_layers.layer_params(base)[2][k])
    model = Workbench(composer).model(Plan(keep=list(range(LAYERS)), merge={i: [1.0, 0.0] for i in range(LAYERS)}))
    ids = torch.tensor([[3, 8, 21, 40, 7, 11]])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, cands[0](ids).logits, atol=1e-4)


@pytest.mark.parametrize("options, named", [
    ({"remove": "two"}, "compress.remove: Input should be a valid integer"),
    ({"remove": "8"}, "tailor option 'remove': removing 8 of 8 layers is not possible"),
    ({"keep": "1.5"}, "compress.keep: Input should be less than 1"),
    ({"keep": "0.75", "remove": "2"}, "compress: remove and keep both name the target"),
    ({"trials": "0"}, "compress.trials: Input should be greater than or equal to 1"),
    ({"seed": "-1"}, "compress.seed: Input should be greater than or equal to 0"),
    ({"objective": "speed:1"}, "compress.objective: .*not of speed"),
    ({"objective": "ppl:0,acc:0"}, "compress.objective: .*at least one weight must be above 0"),
    ({"candidates": "/nonexistent/model"}, "compress.candidates: .*/nonexistent/model is not a model folder"),
    ({"colour": "blue"}, "compress.colour: tailor has no option 'colour'"),
])
def test_bad_options_are_rejected_naming_the_option(tiny, tmp_path, options, named):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=named):
        _tailor(f"hf:{tiny['dir']}", out, options, lambda _t: None)
    assert not out.exists()


def test_bits_and_bad_sources_are_rejected(tiny, tmp_path):
    with pytest.raises(ValueError, match="compress.bits: tailor has no option 'bits'"):
        _tailor(f"hf:{tiny['dir']}", tmp_path / "o", {"bits": "4"})
    with pytest.raises(ValueError, match="source"):
        _tailor("openai:gpt-4o", tmp_path / "o", {})
    assert not (tmp_path / "o").exists()


def test_prefix_shared_evaluation_equals_running_each_transcript_whole(tiny):
    from toolpath.compress import tailor_data

    model = tiny["model"]
    episodes = tailor_data.transcripts(tiny["tok"], "calibration", 3)
    assert tailor_data.shared_prefix(episodes) > 20  # the system prompt and the demonstration
    hits = total = 0
    with torch.no_grad():
        for e in episodes:
            pred = model(e.ids).logits[0, e.scored - 1].argmax(-1)
            hits += int((pred == e.ids[0, e.scored]).sum())
            total += int(e.scored.numel())
        assert tailor_layers._transcript_hits(model, episodes) == (hits, total)

"""model.options.weights: fp32 | bf16 | int8 | int4 on a tiny random Llama, through the spec, the CLI and evals."""

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from toolpath.policies.quant import Int4Linear, Int8Linear, apply_weights, int4_group, model_bytes  # noqa: E402
from toolpath.spec import WEIGHTS, ModelSpec  # noqa: E402

VOCAB = 512


def tiny_llama(seed: int = 0, tied: bool = True, hidden: int = 256):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=256,
                      tie_word_embeddings=tied)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # weights of a trained model's scale, so the logits are not all near zero
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.08)
    return model


IDS = torch.randint(0, VOCAB, (1, 24), generator=torch.Generator().manual_seed(1))


def logits(model):
    with torch.no_grad():
        return model(IDS).logits.float()


# (weights, int4 group, bound on the logits' error relative to their spread, share of argmax tokens kept)
CASES = [("fp32", 32, 0.0, 1.0), ("bf16", 32, 0.04, 0.95), ("int8", 32, 0.08, 0.95), ("int4", 32, 0.35, 0.25),
         ("int4", 128, 0.5, 0.25)]  # chance would keep 1/512


@pytest.mark.parametrize("weights,group,bound,kept", CASES)
def test_each_option_stays_close_to_fp32_and_generates(weights, group, bound, kept):
    ref = logits(tiny_llama())
    model = tiny_llama()
    info = apply_weights(model, weights, group=group)
    out = logits(model)
    # random weights have no structure to lose, so the bounds are loose; fewer bits, larger error
    rel = ((out - ref).norm() / (ref - ref.mean()).norm()).item()
    assert rel <= bound + 1e-6, rel
    assert info["weights"] == weights
    if weights == "int4":
        assert {x.group for x in model.modules() if isinstance(x, Int4Linear)} == {group}
    agree = (out.argmax(-1) == ref.argmax(-1)).float().mean().item()
    assert agree >= kept, agree
    gen = model.generate(IDS, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert gen.shape == (1, IDS.shape[1] + 6)


def test_quantized_layers_really_hold_low_bit_weights():
    model = tiny_llama()
    full = model_bytes(model)
    info8 = apply_weights(model, "int8")
    layers = [m for m in model.modules() if isinstance(m, Int8Linear)]
    assert len(layers) == info8["quantized"] == 2 * 7 + 1  # q k v o gate up down per layer, and the head
    assert all(m.qweight.dtype == torch.int8 and not hasattr(m, "weight") for m in layers)
    assert not any(isinstance(m, torch.nn.Linear) for m in model.modules())
    m = tiny_llama()
    info4 = apply_weights(m, "int4", group=128)
    layers4 = [x for x in m.modules() if isinstance(x, Int4Linear)]
    assert len(layers4) == 15 and not info4["int8_fallback"]
    for x in layers4:  # two 4-bit codes a byte
        assert x.packed.dtype == torch.uint8 and x.packed.numel() == x.in_features * x.out_features // 2
    assert info4["bytes"] < info8["bytes"] < full / 2


def test_int4_layers_are_the_kernels_own_dequantized_groups():
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 64)
    q, scales, zeros = Int4Linear.quantize(lin.weight.detach(), 128)
    assert q.min() >= 0 and q.max() <= 15 and scales.shape == (64, 2)
    deq = ((q.reshape(64, 2, 128).float() - 8) * scales[..., None] + zeros[..., None]).reshape(64, 256)
    layer = Int4Linear.from_float(lin, 128, torch.float32)
    x = torch.randn(3, 256)
    with torch.no_grad():
        assert torch.allclose(layer(x), x @ deq.T + lin.bias, atol=1e-4)
        assert (deq - lin.weight).abs().max() <= scales.max() / 2 + 1e-6  # round to nearest: half a step at most


def test_int4_group_falls_back_to_what_the_kernel_takes():
    assert int4_group(torch.nn.Linear(256, 64), 128) == 128
    assert int4_group(torch.nn.Linear(576, 64), 128) == 64  # SmolLM2's hidden size
    assert int4_group(torch.nn.Linear(256, 64)) == 32  # the default
    assert int4_group(torch.nn.Linear(256, 24)) is None  # outputs not a multiple of 16: int8 instead
    model = tiny_llama(hidden=96)  # 96 = 3 x 32
    info = apply_weights(model, "int4", group=128)
    groups = {x.in_features: x.group for x in model.modules() if isinstance(x, Int4Linear)}
    assert groups == {96: 32, 192: 64}  # the MLP down projection takes 192 = 3 x 64
    assert not info["int8_fallback"]


def test_tied_head_keeps_float_embeddings_and_float_head_option():
    model = tiny_llama(tied=True)
    emb = model.get_input_embeddings().weight.detach().clone()
    apply_weights(model, "int8", lm_head="quantized")
    assert isinstance(model.lm_head, Int8Linear)
    assert model.get_input_embeddings().weight.is_floating_point()
    assert torch.allclose(model.get_input_embeddings().weight.float(), emb, atol=emb.abs().max().item() / 100)
    kept = tiny_llama(tied=True)
    apply_weights(kept, "int4", lm_head="float")
    assert type(kept.lm_head) is torch.nn.Linear
    assert kept.lm_head.weight is kept.get_input_embeddings().weight  # still tied


def test_bad_values_are_refused_with_the_field_named(tmp_path):
    from toolpath.spec import SpecError, load_spec

    spec = tmp_path / "t.yaml"
    spec.write_text("id: t\ninstruction: hi\nmodel:\n  name: local\n  options:\n    weights: int3\n")
    with pytest.raises(SpecError) as err:
        load_spec(str(spec))
    assert "model.options" in str(err.value) and "weights must be one of fp32, bf16, int8, int4" in str(err.value)
    spec.write_text("id: t\ninstruction: hi\nmodel:\n  name: local\n  options:\n    lm_head: half\n")
    with pytest.raises(SpecError, match="lm_head must be one of quantized, float"):
        load_spec(str(spec))
    with pytest.raises(ValueError, match="weights"):
        apply_weights(tiny_llama(), "int2")
    assert ModelSpec(options={"weights": "int4"}).options["weights"] == "int4"


def test_cli_accepts_weights_and_they_reach_the_model_options(tmp_path):
    from toolpath.cli import WEIGHTS as CLI_WEIGHTS
    from toolpath.cli import build_parser

    assert CLI_WEIGHTS == WEIGHTS
    args = build_parser().parse_args(["run", "t.yaml", "--weights", "int4"])
    assert args.weights == "int4"
    assert build_parser().parse_args(["eval", "arith", "--weights", "bf16"]).weights == "bf16"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "t.yaml", "--weights", "int3"])


def test_run_stores_the_weights_in_its_spec(tmp_path, home):
    from conftest import toolpath_cli, write

    from toolpath.runs import Store

    task = write(tmp_path / "t.yaml", "id: t\ninstruction: what is 2+3?\nmodel:\n  name: scripted:s.yaml\n")
    write(tmp_path / "s.yaml", "- answer: '5'\n")
    r = toolpath_cli("run", task, "--weights", "int8", "--json", home=home, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    run = Store(home).get_run(json.loads(r.stdout)["run_id"])
    assert json.loads(run["spec"])["model"]["options"]["weights"] == "int8"


def test_eval_puts_weights_in_every_task_and_resume_keeps_them(store):
    from toolpath.evals.runner import run_eval

    first = run_eval("arith", store, model="python:helpers:ArithPolicy", limit=2, weights="int4")
    assert first.summary()["weights"] == "int4"
    specs = [json.loads(store.get_run(s.run_id)["spec"]) for s in first.samples]
    assert specs and all(s["model"]["options"]["weights"] == "int4" for s in specs)
    again = run_eval("arith", store, resume=first.eval_id)
    assert again.summary()["weights"] == "int4"
    with pytest.raises(ValueError, match="weights must be one of"):
        run_eval("arith", store, model="python:helpers:ArithPolicy", limit=1, weights="q4")


def test_hf_policy_applies_the_option_after_loading(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from toolpath.policies.hf import HFPolicy

    # a byte-level tokenizer without merges: every text encodes, every token decodes (generate's stop strings)
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab["<eos>"] = len(vocab)
    tk = Tokenizer(models.BPE(vocab, []))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>").save_pretrained(tmp_path)
    tiny_llama().save_pretrained(tmp_path)
    policy = HFPolicy.from_path(str(tmp_path), ModelSpec(name=f"hf:{tmp_path}", options={"weights": "int4"}))
    assert policy.weights["weights"] == "int4" and policy.weights["quantized"] == 15
    assert any(isinstance(m, Int4Linear) for m in policy.model.modules())
    from toolpath.state import Message

    resp = policy.respond([Message(role="user", content="what is 2+3?")], [], max_new_tokens=4)
    assert resp.tokens_out > 0

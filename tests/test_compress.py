"""`toolpath compress` with rtn and gptq: the quantizer, the packing, GPTQ against RTN, the written folder and
bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_lm import save_tiny_byte_llama  # noqa: E402

from toolpath.cli import main  # noqa: E402
from toolpath.compress.gptq import Hessian, gptq_quantize  # noqa: E402
from toolpath.compress.quant import quantize_rtn  # noqa: E402
from toolpath.policies.bitpack import pack as pack_bits  # noqa: E402
from toolpath.policies.bitpack import unpack as unpack_bits  # noqa: E402
from toolpath.policies.packed_weights import Quantized  # noqa: E402


# ---- the quantizer and the packing --------------------------------------------------------------------------
@pytest.mark.parametrize("bits", range(1, 9))
def test_pack_round_trip_at_every_width(bits):
    gen = torch.Generator().manual_seed(bits)
    for n in (1, 7, 13, 64, 1001):  # counts that fill no whole byte, and whole ones
        values = torch.randint(0, 2 ** bits, (n,), generator=gen, dtype=torch.int64).to(torch.uint8)
        packed = pack_bits(values, bits)
        assert packed.dtype == torch.uint8 and packed.numel() == -(-n * bits // 8)  # dense: no padding per value
        assert torch.equal(unpack_bits(packed, bits, n), values)


def test_the_stored_stream_is_the_one_folders_were_written_with():
    # Codes 1..5 at 3 bits, lowest bit first: 100 010 110 001 101 -> 10001011 0001101(0): bytes 209 and 88.
    assert pack_bits(torch.tensor([1, 2, 3, 4, 5]), 3).tolist() == [209, 88]
    rows = torch.randint(0, 16, (3, 2, 32), generator=torch.Generator().manual_seed(0)).to(torch.uint8)
    packed = pack_bits(rows, 4)  # along the last axis: each row its own stream, two codes a byte, low nibble first
    assert torch.equal(packed, rows[..., 0::2] | (rows[..., 1::2] << 4))
    assert torch.equal(packed[1, 0], pack_bits(rows[1, 0], 4)) and torch.equal(unpack_bits(packed, 4, 32), rows)


@pytest.mark.parametrize("bits", (1, 2, 3, 4, 8))
@pytest.mark.parametrize("shape,group", [((7, 13), 5), ((3, 128), 128), ((5, 130), 128), ((1, 1), 128)])
def test_quantized_matrix_survives_packing(bits, shape, group):
    w = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    q = quantize_rtn(w, bits, group)
    assert int(q.codes.max()) < 2 ** bits and q.scales.shape == (shape[0], -(-shape[1] // group))
    back = Quantized.unpack(q.pack(), shape, bits, group)
    assert torch.equal(back.codes, q.codes) and torch.equal(back.zeros, q.zeros)
    assert torch.allclose(back.dequantize(), q.dequantize())
    # Round to nearest: every weight within half a step of its value (the clamped range always holds w).
    step = q.scales[:, torch.arange(shape[1]) // group]
    assert torch.all((q.dequantize() - w).abs() <= step / 2 + 1e-5)


def test_bad_widths_and_values_are_refused():
    with pytest.raises(ValueError, match="bits must be an integer from 1 to 8"):
        pack_bits(torch.zeros(3, dtype=torch.uint8), 9)
    with pytest.raises(ValueError, match="does not fit in 2 bits"):
        pack_bits(torch.tensor([4], dtype=torch.uint8), 2)
    with pytest.raises(ValueError, match="too short"):
        unpack_bits(torch.zeros(1, dtype=torch.uint8), 3, 5)


# ---- GPTQ against RTN ---------------------------------------------------------------------------------------
def _layer_error(w, q, x):
    """The layer's output error on the calibration inputs: ||W X^T - Q X^T||²."""
    return float(((w - q) @ x.T).pow(2).sum())


def test_gptq_reconstructs_a_small_layer_no_worse_than_rtn():
    gen = torch.Generator().manual_seed(0)
    # Correlated inputs (a low-rank mix plus noise), as real activations are: that is where error feedback helps.
    x = torch.randn(512, 6, generator=gen) @ torch.randn(6, 24, generator=gen)
    x = x + 0.1 * torch.randn(512, 24, generator=gen)
    w = torch.randn(16, 24, generator=gen)
    h = Hessian(24)
    for chunk in x.split(100):
        h.add(chunk)
    assert torch.allclose(h.h, 2 * x.T @ x / len(x), rtol=1e-4, atol=1e-4)  # the running sum is H = 2XXᵀ/n
    for bits in (2, 3, 4):
        for group in (8, 128):
            rtn = _layer_error(w, quantize_rtn(w, bits, group).dequantize(), x)
            gptq_q = gptq_quantize(w, h.h, bits, group, block=16)
            assert int(gptq_q.codes.max()) < 2 ** bits
            assert _layer_error(w, gptq_q.dequantize(), x) <= rtn, (bits, group)
            ordered = gptq_quantize(w, h.h, bits, group, block=16, act_order=True).dequantize()
            assert _layer_error(w, ordered, x) <= rtn, (bits, group, "act-order")


def test_gptq_on_a_hand_worked_two_column_layer():
    # Two identical inputs: the layer only sees w1 + w2 = 0.1. At 2 bits, one group: range [-0.7, 0.8], step
    # 1.5 / 3 = 0.5, zero point round(0.7 / 0.5) = 1, so the levels are -0.5, 0, 0.5, 1.0. RTN rounds each weight
    # alone: (-0.5, 1.0), a sum of 0.5. GPTQ rounds w1 to -0.5 too, but moves its error (-0.2) onto w2:
    # 0.8 - 0.2 = 0.6 rounds to 0.5, a sum of 0.0, off by 0.1 instead of 0.4.
    x = torch.tensor([[1.0, 1.0], [2.0, 2.0], [-1.0, -1.0]])
    w = torch.tensor([[-0.7, 0.8]])
    h = 2 * x.T @ x / len(x)
    rtn = quantize_rtn(w, 2, 2).dequantize()
    gptq_q = gptq_quantize(w, h, 2, group_size=2).dequantize()
    assert torch.allclose(rtn, torch.tensor([[-0.5, 1.0]]), atol=1e-3)
    assert torch.allclose(gptq_q, torch.tensor([[-0.5, 0.5]]), atol=1e-3)
    assert _layer_error(w, gptq_q, x) == pytest.approx(0.1 ** 2 * 6, rel=1e-2)  # (0.0 - 0.1)² Σx²
    assert _layer_error(w, rtn, x) == pytest.approx(0.4 ** 2 * 6, rel=1e-2)


def test_a_layer_no_input_reached_falls_back_to_rtn():
    w = torch.randn(4, 8)
    q = gptq_quantize(w, torch.zeros(8, 8), 3, 8)
    assert torch.equal(q.codes, quantize_rtn(w, 3, 8).codes)


# ---- `toolpath compress` on a tiny model folder -----------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return save_tiny_byte_llama(tmp_path_factory.mktemp("tiny") / "model")


def _leftovers(out: Path) -> list[str]:
    """What a failed run left: the folder itself, or a temporary sibling."""
    return sorted(p.name for p in out.parent.iterdir() if p.name == out.name or p.name.startswith(f".{out.name}."))


@pytest.mark.parametrize("method,bits", [("rtn", 3), ("gptq", 4)])
def test_compress_writes_a_packed_folder_that_hf_loads(tiny_model, tmp_path, capsys, method, bits):
    from safetensors import safe_open

    from toolpath.policies.hf import HFPolicy
    from toolpath.spec import ModelSpec

    out = tmp_path / "out"
    rc = main(["compress", f"hf:{tiny_model}", "--method", method, "--bits", str(bits), "--option", "group_size=32",
               *(["--option", "nsamples=4", "--option", "seqlen=32"] if method == "gptq" else []),
               "--out", str(out), "--json"])
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    record = json.loads((out / "compression.json").read_text())
    assert record["method"] == method and record["bits"] == bits and record["source"] == f"hf:{tiny_model}"
    assert printed["out"] == str(out) and record["quantized_tensors"] == 14  # 7 linears per layer, 2 layers
    if method == "gptq":
        assert record["calibration"]["nsamples"] == 4 and "pydoc_data" in record["calibration"]["text"]
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        name = "model.layers.0.self_attn.q_proj.weight"
        assert name not in keys  # not stored as floats …
        assert f.get_tensor(f"{name}.codes").dtype == torch.uint8  # … but as packed codes
        assert f.get_tensor(f"{name}.codes").numel() == 64 * 64 * bits // 8
        assert f.get_tensor(f"{name}.scales").dtype == torch.float16
        assert "model.embed_tokens.weight" in keys
    policy = HFPolicy.from_spec(ModelSpec(name=f"hf:{out}", max_new_tokens=5))
    weight = policy.model.model.layers[0].self_attn.q_proj.weight
    assert len(torch.unique(weight[0, :32])) <= 2 ** bits  # one group of one row: at most 2^bits levels
    generated = policy.model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=5, do_sample=False)
    assert generated.shape == (1, 8)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_compressing_a_compressed_folder_reads_its_packed_weights(tiny_model, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["compress", f"hf:{tiny_model}", "--method", "rtn", "--bits", "4", "--out", str(first)]) == 0
    assert main(["compress", f"hf:{first}", "--method", "rtn", "--bits", "8", "--out", str(second)]) == 0
    assert json.loads((second / "compression.json").read_text())["source"] == f"hf:{first}"


@pytest.mark.parametrize("argv,message", [
    (["--method", "gptq", "--bits", "9"], "gptq --bits: Input should be less than or equal to 8 (got '9')"),
    (["--method", "rtn", "--bits", "2.5"], "rtn --bits: Input should be a valid integer"),
    (["--method", "rtn", "--bits", "nan"], "rtn --bits: Input should be a valid integer"),
    (["--method", "moe-bits", "--bits", "0.5"], "moe-bits --bits: Input should be greater than or equal to 1"),
    (["--method", "moe-bits", "--bits", "inf"], "moe-bits --bits: Input should be a finite number"),
    (["--method", "tailor", "--bits", "4"], "tailor --bits: tailor has no option 'bits'"),
    (["--method", "rtn", "--option", "group_size"], "--option 'group_size': expected KEY=VALUE"),
    (["--method", "rtn", "--option", "bits=3"], "--option 'bits=3': give the bit-width as --bits"),
    (["--method", "rtn", "--option", "colour=red"], "rtn --option colour: rtn has no option 'colour'; its options: "
                                                     "bits, group_size"),
    (["--method", "gptq", "--option", "nsamples=many"], "gptq --option nsamples: Input should be a valid integer"),
    (["--method", "gptq", "--option", "act_order=perhaps"], "gptq --option act_order: Input should be a valid "
                                                             "boolean"),
    (["--method", "zip"], "--method zip: unknown compressor 'zip'; available: gptq, moe-bits, rtn, tailor"),
])
def test_bad_arguments_are_clear_errors_and_leave_nothing(tiny_model, tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["compress", f"hf:{tiny_model}", *argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert _leftovers(out) == []


@pytest.mark.parametrize("model,message", [
    ("hf:/no/such/folder", "model 'hf:/no/such/folder': /no/such/folder does not exist"),
    ("local:nope", "unknown local model 'nope'"),
    ("openai:gpt-4.1", "compression needs a local model"),
])
def test_an_unknown_model_is_refused_before_any_work(tmp_path, capsys, model, message):
    out = tmp_path / "out"
    assert main(["compress", model, "--method", "rtn", "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert _leftovers(out) == []


def test_an_existing_output_is_never_overwritten(tiny_model, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["compress", f"hf:{tiny_model}", "--method", "rtn", "--out", str(out)]) == 2
    assert "already exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_a_failure_during_the_work_leaves_nothing(tiny_model, tmp_path, monkeypatch, capsys):
    import toolpath.compress.gptq as gptq

    def broken(*args, **kwargs):
        raise ValueError("the Hessian is not positive definite even with 1000x dampening")

    monkeypatch.setattr(gptq, "quantize_model_rtn", broken)
    out = tmp_path / "out"
    assert main(["compress", f"hf:{tiny_model}", "--method", "rtn", "--out", str(out)]) == 2
    assert "not positive definite" in capsys.readouterr().err
    assert _leftovers(out) == []


def test_every_registered_method_is_a_compressor_kind():
    from toolpath import kinds, registry
    from toolpath.compress import compressor

    methods = [n for n, e in registry.declared("compressor").items() if not e.meta.get("loader")]
    assert sorted(methods) == ["gptq", "moe-bits", "rtn", "tailor"]
    for name in methods:
        kind = compressor(name)
        assert kind.name == name and isinstance(kind.packs, bool)
        assert kinds.options(kind, {}, "compress")  # every option has a default

"""Sparse upcycling: the upcycled layer computes the dense MLP before training, and moe-bits reads its layout."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from toolpath.compress.gptq import quantize_model_gptq  # noqa: E402
from toolpath.compress.moe_bits import allocate, allocation_plan  # noqa: E402
from toolpath.compress.moe_layout import moe_blocks  # noqa: E402
from toolpath.compress.upcycle import load_balancing_loss, upcycle, upcycled_layers  # noqa: E402


def _tiny_qwen():
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=300, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return transformers.Qwen2ForCausalLM(config).eval()


def test_identical_copies_compute_the_dense_mlp_and_noise_breaks_the_tie():
    model = _tiny_qwen()
    x = torch.randint(0, 300, (2, 12))
    with torch.no_grad():
        dense = model(x).logits
        init = upcycle(model, upcycled_layers(model, 2), experts=8, top_k=2, noise=0.0)
        assert torch.allclose(model(x).logits, dense, atol=1e-5)  # renormalised top-k of equal experts
        upcycle(model, [0], experts=4, top_k=2, noise=0.05)
        assert not torch.allclose(model(x).logits, dense, atol=1e-5)
    assert sorted(init) == ["model.layers.1.mlp.gate.weight", "model.layers.2.mlp.gate.weight"]
    with pytest.raises(ValueError, match="the model has 3 decoder layers"):
        upcycled_layers(model, 4)


def test_moe_bits_reads_the_upcycled_layout_and_quantizes_each_expert_at_its_bits():
    model = _tiny_qwen()
    with torch.no_grad():
        init = upcycle(model, [1, 2], experts=8, top_k=2, noise=0.01)
        for name, p in model.named_parameters():  # a trained router: rows whose norms moved apart
            if name.endswith("mlp.gate.weight"):
                p.mul_(torch.linspace(0.5, 2.0, 8)[:, None])
    blocks = moe_blocks(model)
    assert [b.layer for b in blocks] == [1, 2]
    assert [b.router_name for b in blocks] == ["model.layers.1.mlp.gate.weight", "model.layers.2.mlp.gate.weight"]
    assert blocks[0].w1[3].shape == (48, 32)
    routers = {int(name.split(".")[2]): w for name, w in init.items()}
    bits, orders = allocate(model, 2.0, init=routers)
    assert orders[1][:2] == [0, 1]  # the smallest norm change first (the paper's most sensitive)
    calib = torch.randint(0, 300, (4, 16), generator=torch.Generator().manual_seed(0))
    quantized = quantize_model_gptq(model, calib, allocation_plan(bits, 0), group_size=16)
    for e in range(8):
        for proj in ("gate_proj", "up_proj", "down_proj"):
            assert quantized[f"model.layers.2.mlp.experts.{e}.{proj}.weight"].bits == bits[2][e]
    assert not any("self_attn" in name or ".mlp.gate." in name or "layers.0." in name for name in quantized)


def test_load_balancing_loss_is_one_when_routing_is_uniform():
    assert float(load_balancing_loss(torch.zeros(16, 8), top_k=2)) == pytest.approx(1.0)
    skewed = torch.zeros(16, 8)
    skewed[:, :2] = 5.0
    assert float(load_balancing_loss(skewed, top_k=2)) > 3.0

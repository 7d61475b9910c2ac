"""moe-bits: the reference's count solver, the expert order, both Mixtral layouts, and the written folder."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from torch import nn  # noqa: E402

from toolpath.cli import main  # noqa: E402
from toolpath.compress.gptq import quantize_model_gptq  # noqa: E402
from toolpath.compress.moe_bits import (  # noqa: E402
    allocate,
    allocation_plan,
    combined_order,
    expert_order,
    router_order,
    solve_three_level_counts,
)
from toolpath.compress.moe_layout import MoEBlock, moe_blocks  # noqa: E402


# ---- the count solver ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("avg,counts", [(2.0, (2, 4, 2)), (2.25, (2, 2, 4)), (1.5, (4, 4, 0)), (2.5, (2, 0, 6)),
                                        (3.0, (0, 0, 8)), (1.0, (8, 0, 0))])
def test_the_solver_gives_the_reference_counts(avg, counts):
    # (low, mid, high) for 8 experts at levels 1/2/3: the first three are the reference solver's published
    # answers; every one keeps the requested average.
    assert solve_three_level_counts(8, avg, 3, 2, 1) == counts
    assert (counts[0] * 1 + counts[1] * 2 + counts[2] * 3) / 8 == avg


def test_the_solver_needs_equally_spaced_levels():
    with pytest.raises(ValueError, match="equally spaced"):
        solve_three_level_counts(8, 2.0, 4, 2, 1)


# ---- the order ----------------------------------------------------------------------------------------------
def _router(norms: list[float], hidden: int = 16, seed: int = 0) -> torch.Tensor:
    """Rows with exactly the given l2 norms, in random directions."""
    rows = torch.randn(len(norms), hidden, generator=torch.Generator().manual_seed(seed))
    return rows / rows.norm(dim=1, keepdim=True) * torch.tensor(norms)[:, None]


def test_the_order_follows_the_change_of_router_row_norms():
    change = [0.5, -0.2, 0.1, 0.9, 0.0, 0.3, -0.5, 0.7]
    init = _router([1.0 + 0.1 * e for e in range(8)], seed=1)
    final = _router([1.0 + 0.1 * e + c for e, c in enumerate(change)], seed=2)
    # Smallest change first (most sensitive, most bits), negative changes included.
    assert router_order(final, init) == [6, 1, 4, 2, 5, 0, 7, 3]
    # Without the router at initialisation: the final norms, smallest first.
    assert router_order(final, None) == sorted(range(8), key=lambda e: 1.0 + 0.1 * e + change[e])
    with pytest.raises(ValueError, match="router at initialisation has shape"):
        router_order(final, init[:4])


def test_a_high_variance_expert_moves_forward_past_low_variance_ones():
    order = [0, 1, 2, 3, 4]
    # Expert 4 (least sensitive) has a variance above 3x that of experts 1..3 but not of expert 0: it moves to
    # position 1. Expert 2's variance is not 3x anyone's ahead of it: it stays.
    variance = [10.0, 1.0, 2.0, 1.0, 9.0]
    assert combined_order(order, variance, zeta=3.0) == [0, 4, 1, 2, 3]
    assert combined_order(order, [1.0] * 5, zeta=3.0) == order  # equal variances: the router order stands


def test_expert_order_kinds():
    w1 = [torch.full((4, 8), 0.0) for _ in range(4)]
    for e, w in enumerate(w1):
        w[0, :4] = float(e)  # variance grows with e
    block = MoEBlock(0, "model.layers.0.mlp.gate.weight", _router([1.0, 2.0, 3.0, 4.0]), w1)
    assert expert_order(block, None, "router") == [0, 1, 2, 3]
    assert expert_order(block, None, "variance") == [3, 2, 1, 0]
    assert expert_order(block, None, "reversed") == expert_order(block, None, "combined")[::-1]
    random_order = expert_order(block, None, "random", seed=1)
    assert sorted(random_order) == [0, 1, 2, 3] and random_order == expert_order(block, None, "random", seed=1)
    with pytest.raises(ValueError, match="order 'best'"):
        expert_order(block, None, "best")


# ---- both Mixtral layouts -----------------------------------------------------------------------------------
def _tiny_mixtral(seed: int = 0, vocab: int = 300):
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(seed)
    config = MixtralConfig(vocab_size=vocab, hidden_size=32, intermediate_size=24, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=8,
                           num_experts_per_tok=2, max_position_embeddings=64)
    model = MixtralForCausalLM(config).eval()
    for layer in model.model.layers:  # random experts that differ in scale, so variances differ
        with torch.no_grad():
            layer.mlp.experts.gate_up_proj.mul_(torch.linspace(0.5, 3.0, 8)[:, None, None])
    return model


class PerExpertMoE(nn.Module):
    """The per-expert layout (older Mixtral checkpoints): a Linear router and w1/w3/w2 Linears per expert."""

    def __init__(self, fused_block):
        super().__init__()
        experts = fused_block.experts
        n, two_i, hidden = experts.gate_up_proj.shape
        inter = two_i // 2
        self.top_k = fused_block.gate.top_k
        self.gate = nn.Linear(hidden, n, bias=False)
        self.gate.weight.data.copy_(fused_block.gate.weight.data)
        self.act = experts.act_fn
        self.experts = nn.ModuleList()
        for e in range(n):
            m = nn.Module()
            m.w1, m.w3, m.w2 = nn.Linear(hidden, inter, bias=False), nn.Linear(hidden, inter, bias=False), \
                nn.Linear(inter, hidden, bias=False)
            m.w1.weight.data.copy_(experts.gate_up_proj.data[e, :inter])
            m.w3.weight.data.copy_(experts.gate_up_proj.data[e, inter:])
            m.w2.weight.data.copy_(experts.down_proj.data[e])
            self.experts.append(m)

    def forward(self, hidden_states):
        b, s, h = hidden_states.shape
        x = hidden_states.reshape(-1, h)
        probs = torch.softmax(self.gate(x).float(), dim=-1)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            if len(token):
                y = expert.w2(self.act(expert.w1(x[token])) * expert.w3(x[token]))
                out.index_add_(0, token, y * weights[token, slot, None])
        return out.reshape(b, s, h)


def _per_expert_copy(model):
    import copy

    other = copy.deepcopy(model)
    for layer in other.model.layers:
        layer.mlp = PerExpertMoE(layer.mlp)
    return other


def test_both_layouts_are_read_and_quantized_alike():
    fused = _tiny_mixtral()
    split = _per_expert_copy(fused)
    x = torch.randint(0, 300, (2, 16))
    assert torch.allclose(fused(x).logits, split(x).logits, atol=1e-5)  # the same model, two layouts
    a, b = moe_blocks(fused), moe_blocks(split)
    assert [blk.router_name for blk in a] == ["model.layers.0.mlp.gate.weight", "model.layers.1.mlp.gate.weight"]
    assert [blk.router_name for blk in b] == ["model.layers.0.mlp.gate.weight", "model.layers.1.mlp.gate.weight"]
    assert all(torch.equal(p.router, q.router) and all(torch.equal(u, v) for u, v in zip(p.w1, q.w1))
               for p, q in zip(a, b))
    bits_a, orders_a = allocate(fused, 2.0)
    bits_b, orders_b = allocate(split, 2.0)
    assert orders_a == orders_b and bits_a == bits_b
    assert sorted(bits_a[0].values()) == [1, 1, 2, 2, 2, 2, 3, 3]

    calib = torch.randint(0, 300, (4, 32), generator=torch.Generator().manual_seed(0))
    qa = quantize_model_gptq(fused, calib, allocation_plan(bits_a, 4), group_size=16)
    qb = quantize_model_gptq(split, calib, allocation_plan(bits_b, 4), group_size=16)
    # GPTQ treats rows independently given the Hessian, and each expert's Hessian comes from the tokens routed
    # to it in both layouts: fused gate_up = [w1; w3] quantizes exactly as w1 and w3 do apart.
    gu = qa["model.layers.0.mlp.experts.gate_up_proj"]
    for e in range(8):
        assert gu[e].bits == bits_a[0][e] == qb[f"model.layers.0.mlp.experts.{e}.w1.weight"].bits
        w1 = split.model.layers[0].mlp.experts[e].w1.weight
        assert torch.allclose(fused.model.layers[0].mlp.experts.gate_up_proj[e, :24], w1, atol=1e-4)
        w2 = split.model.layers[1].mlp.experts[e].w2.weight
        assert torch.allclose(fused.model.layers[1].mlp.experts.down_proj[e], w2, atol=1e-4)
    assert qa["model.layers.0.self_attn.q_proj.weight"].bits == 4


# ---- `toolpath compress --method moe-bits` ------------------------------------------------------------------
def test_compress_moe_bits_writes_a_mixed_precision_folder(tmp_path, capsys):
    from safetensors import safe_open
    from safetensors.torch import save_file

    from toolpath.compress.text import split_text
    from toolpath.compress.tiny_moe import byte_bpe_tokenizer, router_weights
    from toolpath.policies.hf import HFPolicy
    from toolpath.spec import ModelSpec

    model = _tiny_mixtral()
    folder = tmp_path / "moe"
    init = {k: v * 0.5 for k, v in router_weights(model).items()}
    model.save_pretrained(str(folder))
    byte_bpe_tokenizer(split_text()[0][:20000], vocab=300).save_pretrained(str(folder))
    save_file(init, str(folder / "router_init.safetensors"))
    out = tmp_path / "out"
    rc = main(["compress", f"hf:{folder}", "--method", "moe-bits", "--bits", "2.25", "--option", "nsamples=4",
               "--option", "seqlen=32", "--option", "group_size=16", "--out", str(out), "--json"])
    assert rc == 0, capsys.readouterr().err
    record = json.loads((out / "compression.json").read_text())
    assert record["levels"] == [1, 2, 3] and "since initialisation" in record["sensitivity"]
    for layer in ("0", "1"):
        assert sorted(record["allocation"][layer].values()) == [1, 1, 2, 2, 3, 3, 3, 3]  # (2, 2, 4)
    # The most sensitive expert (first in the order) has the most bits.
    assert record["allocation"]["0"][str(record["orders"]["0"][0])] == 3
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert "model.layers.0.mlp.experts.gate_up_proj" not in keys
    low = [e for e, b in record["allocation"]["0"].items() if b == 1][0]
    assert f"model.layers.0.mlp.experts.gate_up_proj.{low}.codes" in keys
    config = json.loads((out / "config.json").read_text())["toolpath_compression"]
    assert config["tensors"]["model.layers.0.mlp.experts.gate_up_proj"]["experts"][low]["bits"] == 1
    policy = HFPolicy.from_spec(ModelSpec(name=f"hf:{out}"))
    assert policy.model.generate(torch.tensor([[1, 2]]), max_new_tokens=3, do_sample=False).shape == (1, 5)


def test_moe_bits_refuses_a_dense_model_and_bad_levels(tmp_path, capsys):
    from transformers import LlamaConfig, LlamaForCausalLM

    from toolpath.compress.text import split_text
    from toolpath.compress.tiny_moe import byte_bpe_tokenizer

    dense = tmp_path / "dense"
    LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(str(dense))
    byte_bpe_tokenizer(split_text()[0][:5000], vocab=300).save_pretrained(str(dense))
    out = tmp_path / "out"
    assert main(["compress", f"hf:{dense}", "--method", "moe-bits", "--out", str(out)]) == 2
    assert "has no MoE layers" in capsys.readouterr().err
    assert main(["compress", f"hf:{dense}", "--method", "moe-bits", "--option", "levels=1,2,4",
                 "--out", str(out)]) == 2
    assert "three equally spaced bit-widths" in capsys.readouterr().err
    assert main(["compress", f"hf:{dense}", "--method", "moe-bits", "--bits", "3.5", "--out", str(out)]) == 2
    assert "between the levels 1 and 3" in capsys.readouterr().err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(("out", ".out"))]


def test_router_init_is_read_in_either_layout(tmp_path):
    from safetensors.torch import save_file

    from toolpath.compress.moe_bits import read_router_init

    a, b = torch.randn(8, 16), torch.randn(8, 16)
    save_file({"model.layers.0.mlp.gate.weight": a, "model.layers.1.block_sparse_moe.gate.weight": b,
               "model.embed_tokens.weight": torch.zeros(2, 2)}, str(tmp_path / "r.safetensors"))
    routers = read_router_init(tmp_path / "r.safetensors")
    assert set(routers) == {0, 1} and torch.equal(routers[0], a) and torch.equal(routers[1], b)
    save_file({"x": a}, str(tmp_path / "none.safetensors"))
    with pytest.raises(ValueError, match="no `layers.N.…gate.weight` tensors"):
        read_router_init(tmp_path / "none.safetensors")

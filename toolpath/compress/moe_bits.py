"""Expert-wise mixed precision for Mixture-of-Experts models (Rabbani et al., "Efficient Quantization of
Mixture-of-Experts with Theoretical Generalization Guarantees", ICLR 2026; code: nowazrabbani/moe_quantization).

Per MoE layer, the experts are ranked from most to least sensitive and given bits by rank:
  1. Sensitivity: the change of each router row's l2 norm during training, ‖r_e(final)‖ − ‖r_e(init)‖, sorted
     ascending (a smaller change, negative included, means more sensitive, so more bits), as the reference's
     switch_expert_order_preparer.py does. Without the router at initialisation (`router_init`), the final row
     norm, ascending, stands in (the reference's Mixtral path, compute_router_order).
  2. Variance adjustment (zeta = 3): each expert's score is the maximum over its neurons (rows of w1, the gate
     projection) of the variance of that neuron's weights. Walking the order from the least sensitive end, an
     expert moves forward to the first position whose expert's score × zeta is below its own, if that is ahead
     of it (the reference's compute_combined_order, reproduced step by step).
  3. Bits: three equally spaced levels (bl, bm, bh), by default 1, 2, 3 (the reference's example); the counts
     (n_l, n_m, n_h) come from the reference's solve_three_level_counts_policy, reproduced exactly, and the first
     n_h experts of the order get bh, the next n_m bm, the rest bl. At averages 2.0 / 2.25 / 2.5 over 8 experts
     the counts are (2, 4, 2), (2, 2, 4), (2, 0, 6).
Each expert is then quantized with GPTQ at its bits (gptq.py); the other linears (attention) at `attn_bits`
(4, the reference's attention level; 0 leaves them in float).
"""

from __future__ import annotations

import copy
import random
import re
from pathlib import Path
from typing import Annotated, Literal

import torch
from pydantic import BeforeValidator, Field, model_validator

from .gptq import BLOCK, DAMP, quantize_model_gptq
from .moe_layout import MoEBlock, expert_of, moe_blocks
from .options import Calibration, GroupSize, Seed, calibration_fits
from .quant import GROUP_SIZE

ORDERS = ("combined", "router", "variance", "reversed", "random")
_LAYER = re.compile(r"layers\.(\d+)\.")


def solve_three_level_counts(num_experts: int, b_avg: float, bh: int, bm: int, bl: int) -> tuple[int, int, int]:
    """(n_l, n_m, n_h): the reference's solve_three_level_counts_policy. Start from the two-level split around
    bm that hits the average, then trade two mid experts for one low and one high (the average stays) while the
    region of the average allows: above the upper third of [bl, bh] always, in the middle third while the mid
    experts left are at least the promoted ones, in the lower third never."""
    if bh - bm != bm - bl:
        raise ValueError(f"the three bit levels must be equally spaced, got {bl}, {bm}, {bh}")
    if b_avg >= bm:
        n_h = int(round(max(0.0, min(1.0, (b_avg - bm) / (bh - bm))) * num_experts))
        n_m, n_l, base_n_h = num_experts - n_h, 0, n_h
    else:
        n_m = int(round(max(0.0, min(1.0, (b_avg - bl) / (bm - bl))) * num_experts))
        n_l, n_h, base_n_h = num_experts - n_m, 0, 0
    delta = bh - bl
    region = "bh" if b_avg > bh - delta / 3 else "bm" if b_avg >= bh - 2 * delta / 3 else "bl"
    while n_m >= 2:
        cand = (n_l + 1, n_m - 2, n_h + 1)
        if region == "bm" and cand[1] < cand[2] - base_n_h:
            break
        if region == "bl":
            break
        n_l, n_m, n_h = cand
    return n_l, n_m, n_h


def router_order(final: torch.Tensor, init: torch.Tensor | None) -> list[int]:
    """Experts from most to least sensitive: ascending change of the router row norm (or final norm)."""
    score = torch.linalg.vector_norm(final.float(), ord=2, dim=1)
    if init is not None:
        if init.shape != final.shape:
            raise ValueError(f"router at initialisation has shape {tuple(init.shape)}, "
                             f"the model's {tuple(final.shape)}")
        score = score - torch.linalg.vector_norm(init.float(), ord=2, dim=1)
    return torch.sort(score, stable=True).indices.tolist()


def variance_scores(w1: list[torch.Tensor]) -> list[float]:
    """Each expert's maximum intra-neuron variance: the largest variance over the rows of its w1."""
    return [float(torch.max(torch.var(w.float(), dim=1))) for w in w1]


def combined_order(order: list[int], variance: list[float], zeta: float = 3.0) -> list[int]:
    """The reference's compute_combined_order for one layer."""
    out = copy.deepcopy(order)
    for expert in reversed(order):
        ahead = [k for k, other in enumerate(out) if zeta * variance[other] < variance[expert]]
        if ahead and out.index(expert) > ahead[0]:
            out.insert(ahead[0], out.pop(out.index(expert)))
    return out


def bits_by_rank(order: list[int], counts: tuple[int, int, int], levels: tuple[int, int, int]) -> dict[int, int]:
    n_l, n_m, n_h = counts
    bl, bm, bh = levels
    return {e: bh if rank < n_h else bm if rank < n_h + n_m else bl for rank, e in enumerate(order)}


def expert_order(block: MoEBlock, init: torch.Tensor | None, kind: str = "combined", zeta: float = 3.0,
                 seed: int = 0) -> list[int]:
    """One layer's experts, most bits first, by `kind`: combined (the paper's), router, variance (descending
    score), reversed (the paper's order backwards), random (seeded)."""
    if kind not in ORDERS:
        raise ValueError(f"order {kind!r}: expected one of {', '.join(ORDERS)}")
    n = block.router.shape[0]
    if kind == "random":
        order = list(range(n))
        random.Random(seed * 1000 + block.layer).shuffle(order)
        return order
    variance = variance_scores(block.w1)
    if kind == "variance":
        return sorted(range(n), key=lambda e: -variance[e])
    order = router_order(block.router, init)
    if kind in ("combined", "reversed"):
        order = combined_order(order, variance, zeta)
    return order[::-1] if kind == "reversed" else order


def read_router_init(path: Path) -> dict[int, torch.Tensor]:
    """Router weights at initialisation by layer index, from a safetensors file with either layout's names. The
    file is checked before it is read (policies/model_files.py) and holds nothing but 2-D float routers: any other
    file is a ValueError naming it."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from ..policies.model_files import check_safetensors

    what = "option router_init"
    if path.suffix != ".safetensors":
        raise ValueError(f"{what} {path}: expected a .safetensors file of router weights")
    header = check_safetensors(path, what)
    routers = {name for name in header if _LAYER.search(name) and name.endswith("gate.weight")}
    if not routers:
        raise ValueError(f"{what} {path}: no `layers.N.…gate.weight` tensors in it")
    wrong = [n for n in routers if len(header[n]["shape"]) != 2 or header[n]["dtype"] not in ("F32", "F16", "BF16")]
    if wrong:
        raise ValueError(f"{what} {path}: {wrong[0]} is not a 2-D float router weight")
    try:
        tensors = load_file(str(path))
    except SafetensorError as err:
        raise ValueError(f"{what} {path}: cannot read it: {err}") from None
    return {int(_LAYER.search(name).group(1)): tensors[name] for name in sorted(routers)}


def allocate(model, b_avg: float, levels=(1, 2, 3), kind: str = "combined", init: dict[int, torch.Tensor] | None = None,
             zeta: float = 3.0, seed: int = 0) -> tuple[dict[int, dict[int, int]], dict[int, list[int]]]:
    """({layer: {expert: bits}}, {layer: order}) for every MoE layer of `model`."""
    blocks = moe_blocks(model)
    if not blocks:
        raise ValueError(f"{type(model).__name__} has no MoE layers (a router `gate` beside `experts`)")
    bl, bm, bh = levels
    bits, orders = {}, {}
    for block in blocks:
        counts = solve_three_level_counts(block.router.shape[0], b_avg, bh, bm, bl)
        if init is not None and block.layer not in init:
            raise ValueError(f"router_init has no router for layer {block.layer}")
        orders[block.layer] = expert_order(block, init[block.layer] if init else None, kind, zeta, seed)
        bits[block.layer] = bits_by_rank(orders[block.layer], counts, levels)
    return bits, orders


def allocation_plan(bits: dict[int, dict[int, int]], attn_bits: int):
    """A gptq.Plan: an expert's weights at its bits, every other linear at `attn_bits` (0: left in float)."""
    def plan(name: str, expert: int | None):
        e = expert_of(name, expert)
        m = _LAYER.search(name)
        if e is not None and m and int(m.group(1)) in bits:
            return bits[int(m.group(1))][e]
        return attn_bits or None
    return plan


# ---- `toolpath compress --method moe-bits` ------------------------------------------------------------------
def _levels(value):
    """Three equally spaced bit-widths from 1 to 8, given as "1,2,3" on the command line or as a sequence."""
    text = value if isinstance(value, str) else ",".join(map(str, value))
    try:
        levels = tuple(sorted(int(x) for x in text.split(",")))
    except ValueError:
        levels = ()
    if len(levels) != 3 or not all(1 <= b <= 8 for b in levels) or levels[2] - levels[1] != levels[1] - levels[0] \
            or levels[0] == levels[1]:
        raise ValueError("expected three equally spaced bit-widths from 1 to 8, e.g. 1,2,3")
    return levels


class MoEBitsOptions(Calibration):
    bits: float = Field(2.5, ge=1, le=8, allow_inf_nan=False,
                        description="the average bit-width over each MoE layer's experts")
    levels: Annotated[tuple[int, int, int], BeforeValidator(_levels)] = Field(
        (1, 2, 3), description="the three bit levels experts get, most sensitive first")
    router_init: str = Field("", description="safetensors file of the routers at initialisation "
                                             "(default: router_init.safetensors beside an hf: source)")
    zeta: float = Field(3.0, ge=0, le=1000, allow_inf_nan=False,
                        description="variance ratio that moves an expert ahead (beyond 1,000 none moves)")
    order: Literal[ORDERS] = Field("combined", description="how experts are ranked")
    order_seed: Seed = Field(0, description="seed of the random order")
    attn_bits: int = Field(4, ge=0, le=8, description="bits of the other linears (0: left in float)")
    group_size: GroupSize = GROUP_SIZE

    @model_validator(mode="after")
    def _average_within_levels(self):
        if not self.levels[0] <= self.bits <= self.levels[2]:
            raise ValueError(f"bits {self.bits:g}: the average must lie between the levels {self.levels[0]} and "
                             f"{self.levels[2]}")
        return self


class MoEBits:
    """Expert-wise mixed precision by router sensitivity and weight variance, each expert quantized with GPTQ."""

    name = "moe-bits"
    packs = True  # writes packed low-bit weights
    Options = MoEBitsOptions

    def compress(self, source: str, out: Path, *, options: MoEBitsOptions, log) -> dict:
        from ..policies.packed_weights import save_packed
        from .source import load_source
        from .text import DESCRIPTION, calibration_batches

        opts = options
        init_path = Path(opts.router_init).expanduser() if opts.router_init else None
        if init_path is None and source.startswith("hf:"):
            beside = Path(source[3:]).expanduser() / "router_init.safetensors"
            init_path = beside if beside.is_file() else None
        if init_path is not None and not init_path.exists():
            raise ValueError(f"option router_init={opts.router_init!r}: no such file")
        init = read_router_init(init_path) if init_path else None  # checked before the model is loaded
        model, tokenizer = load_source(source)
        calibration_fits(self.name, opts.nsamples, opts.seqlen, model.config.get_text_config().hidden_size)
        allocation, orders = allocate(model, opts.bits, opts.levels, opts.order, init, opts.zeta, opts.order_seed)
        log(f"moe-bits: {len(allocation)} MoE layers, levels {opts.levels}, average {opts.bits:g}")
        calib = calibration_batches(tokenizer, opts.nsamples, opts.seqlen, opts.seed)
        quantized = quantize_model_gptq(model, calib, allocation_plan(allocation, opts.attn_bits), opts.group_size)
        info = {"bits": opts.bits, "levels": list(opts.levels), "order": opts.order, "zeta": opts.zeta,
                "attn_bits": opts.attn_bits, "group_size": opts.group_size, "damp": DAMP, "block": BLOCK,
                "sensitivity": (f"router row norm change since initialisation ({init_path})" if init_path else
                                "final router row norm (no router at initialisation given)"),
                "allocation": {str(layer): {str(e): b for e, b in sorted(v.items())}
                               for layer, v in allocation.items()},
                "orders": {str(layer): o for layer, o in orders.items()},
                "quantized_tensors": len(quantized),
                "calibration": {"text": DESCRIPTION, "nsamples": opts.nsamples, "seqlen": opts.seqlen,
                                "seed": opts.seed}}
        save_packed(model, tokenizer, quantized, out, {"method": self.name, **info})
        return info


KIND = MoEBits()

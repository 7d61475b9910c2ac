"""GPTQ (Frantar et al., 2023) as published, and round-to-nearest (RTN), over a transformers causal LM.

GPTQ quantizes a linear layer's weight W [rows, cols] column by column, feeding each column's rounding error
forward onto the columns not yet quantized, weighted by the inverse Hessian of the layer's reconstruction
loss, H = 2 X Xᵀ over calibration activations X:
  - dampening: H += 0.01 · mean(diag H) · I; inputs that never fire (diag 0) are pinned;
  - the upper Cholesky factor of H⁻¹ gives the per-column update rows;
  - lazy batch updates: the error of a block of 128 columns is applied to the rest in one matrix product;
  - group size 128: each group of input columns gets its own scale and zero point, taken when the
    quantizer reaches the group's first column (so they see the error-updated weights);
  - act-order (off by default): columns in order of decreasing diag(H), with the groups' parameters fixed
    beforehand on the natural column groups ("static groups") so the stored layout stays the plain one.
The model is quantized layer by layer, sequentially: calibration inputs are caught at the first decoder layer,
each layer's linears are quantized from Hessians collected with forward hooks, and the layer's outputs,
recomputed with its quantized weights, are the next layer's inputs. Mixtral's fused experts (3-D tensors)
get one Hessian per expert from the tokens the router sent to it (see moe_layout.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from ..policies.bitpack import check_bits
from ..policies.packed_weights import Quantized
from .hessian import Hessian
from .moe_layout import HessianHooks, decoder_layers, layer_targets
from .options import Calibration, GroupSize, WholeBits
from .quant import GROUP_SIZE, dequantize_with, group_params, quantize_rtn, quantize_with

__all__ = ["Hessian", "gptq_quantize", "quantize_model_gptq", "quantize_model_rtn", "KIND"]

BLOCK = 128
DAMP = 0.01


def gptq_quantize(w: torch.Tensor, h: torch.Tensor, bits: int, group_size: int = GROUP_SIZE, block: int = BLOCK,
                  damp: float = DAMP, act_order: bool = False) -> Quantized:
    """Quantize `w` [rows, cols] given the Hessian `h` [cols, cols] of its inputs."""
    check_bits(bits)
    w = w.detach().clone().float()
    h = h.detach().clone().float()
    rows, cols = w.shape
    if h.shape != (cols, cols):
        raise ValueError(f"Hessian shape {tuple(h.shape)} does not match a weight of {cols} columns")
    if not torch.any(torch.diag(h) > 0):  # no calibration input reached this layer: nothing to weigh errors by
        return quantize_rtn(w, bits, group_size)
    dead = torch.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    groups = -(-cols // group_size)
    scales = torch.zeros(rows, groups)
    zeros = torch.zeros(rows, groups)
    if act_order:
        for g in range(groups):  # static groups: parameters from the natural column groups, before any update
            scales[:, g], zeros[:, g] = group_params(w[:, g * group_size:(g + 1) * group_size], bits)
        perm = torch.argsort(torch.diag(h), descending=True)
    else:
        perm = torch.arange(cols)
    w, h = w[:, perm], h[perm][:, perm]
    hinv = _inverse_cholesky(h, damp)
    q = torch.zeros_like(w)
    codes = torch.zeros(rows, cols, dtype=torch.uint8)
    for i1 in range(0, cols, block):
        i2 = min(i1 + block, cols)
        w1 = w[:, i1:i2].clone()
        err1 = torch.zeros_like(w1)
        hinv1 = hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            col = int(perm[i1 + i])
            g = col // group_size
            if not act_order and col % group_size == 0:  # the group starts: its parameters from the updated weights
                ahead = torch.cat([w1[:, i:], w[:, i2:]], dim=1)[:, :group_size]
                scales[:, g], zeros[:, g] = group_params(ahead, bits)
            c = quantize_with(w1[:, i:i + 1], scales[:, g], zeros[:, g], bits)
            codes[:, i1 + i] = c[:, 0].to(torch.uint8)
            qcol = dequantize_with(c, scales[:, g], zeros[:, g])[:, 0]
            q[:, i1 + i] = qcol
            err = (w1[:, i] - qcol) / hinv1[i, i]
            w1[:, i:] -= err[:, None] * hinv1[i, i:][None, :]
            err1[:, i] = err
        w[:, i2:] -= err1 @ hinv[i1:i2, i2:]
    inverse = torch.argsort(perm)
    return Quantized(codes[:, inverse], scales, zeros.to(torch.uint8), bits, group_size)


def _inverse_cholesky(h: torch.Tensor, damp: float) -> torch.Tensor:
    """Upper Cholesky factor of (H + λI)⁻¹, λ = damp · mean(diag H); the damping grows tenfold if H is still
    not positive definite (a rank-poor Hessian from little calibration data)."""
    eye = torch.eye(h.shape[0])
    mean = torch.mean(torch.diag(h))
    for attempt in range(4):
        try:
            lower = torch.linalg.cholesky(h + damp * (10 ** attempt) * mean * eye)
            return torch.linalg.cholesky(torch.cholesky_inverse(lower), upper=True)
        except torch.linalg.LinAlgError:
            continue
    raise ValueError("the Hessian is not positive definite even with 1000x dampening")


# ---- the whole model --------------------------------------------------------------------------------------
# A plan says the bits of each quantized tensor: plan(name, expert) -> bits or None (left in float), where
# `name` is the weight's state-dict name and `expert` the expert index of a fused 3-D tensor (else None).
Plan = Callable[[str, "int | None"], "int | None"]


def uniform_plan(bits: int) -> Plan:
    check_bits(bits)
    return lambda name, expert: bits


def quantize_model_rtn(model, plan: Plan, group_size: int = GROUP_SIZE) -> dict[str, Any]:
    """Round every planned weight to nearest; returns {name: Quantized or {expert: Quantized}}."""
    out: dict[str, Any] = {}
    layers = decoder_layers(model)
    with _progress("rtn", len(layers)) as line:
        for layer in layers:
            for name, param, experts in layer_targets(model, layer):
                out.update(_quantize_param(name, param, experts, plan,
                                           lambda w, b, e: quantize_rtn(w, b, group_size)))
            line.update()
        line.close(f"{len(out)} weights quantized")
    return out


def _progress(label: str, layers: int):
    """The layer loop's stage: layers done, rate and time left (toolpath/progress.py, on stderr)."""
    from ..progress import Progress

    return Progress(f"{label}: quantizing {layers} decoder layers", layers, unit="layers")


def quantize_model_gptq(model, calibration: torch.Tensor, plan: Plan, group_size: int = GROUP_SIZE,
                        act_order: bool = False, chunk: int = 8) -> dict[str, Any]:
    """GPTQ over every planned weight, layer by layer; `calibration` [n, seqlen] token ids."""
    layers = decoder_layers(model)
    inputs = _first_layer_inputs(model, layers[0], calibration, chunk)
    out: dict[str, Any] = {}
    with _progress("gptq", len(layers)) as line:
        for layer in layers:
            targets = layer_targets(model, layer)
            with HessianHooks(model, layer, targets) as hooks:
                _run_layer(layer, inputs)
            for name, param, experts in targets:
                def fit(w, bits, expert, name=name):
                    return gptq_quantize(w, hooks.hessian(name, expert), bits, group_size, act_order=act_order)
                out.update(_quantize_param(name, param, experts, plan, fit))
            inputs = [(_run_layer(layer, [(x, kw)])[0], kw) for x, kw in inputs]  # quantized outputs feed the next
            line.update()
        line.close(f"{len(out)} weights quantized")
    return out


def _quantize_param(name, param, experts, plan: Plan, fit) -> dict[str, Any]:
    """Quantize one weight (2-D) or each expert's slice of a fused 3-D weight, write the de-quantized values back
    into the model (the next layers' calibration sees the quantized model) and return the codes."""
    if experts is None:
        bits = plan(name, None)
        if bits is None:
            return {}
        qz = fit(param.data, bits, None)
        param.data.copy_(qz.dequantize(param.dtype))
        return {name: qz}
    parts = {}
    for e in range(experts):
        bits = plan(name, e)
        if bits is None:
            continue
        qz = fit(param.data[e], bits, e)
        param.data[e].copy_(qz.dequantize(param.dtype))
        parts[e] = qz
    return {name: parts} if parts else {}


class _Caught(Exception):
    pass


def _first_layer_inputs(model, first, calibration: torch.Tensor, chunk: int) -> list[tuple[torch.Tensor, dict]]:
    """(hidden states, keyword arguments) the first decoder layer receives, one entry per chunk of samples."""
    caught = []

    def grab(module, args, kwargs):
        caught.append((args[0] if args else kwargs.pop("hidden_states"),
                       {k: v for k, v in kwargs.items() if k != "hidden_states"}))
        raise _Caught

    handle = first.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.inference_mode():
            for start in range(0, len(calibration), chunk):
                try:
                    model(input_ids=calibration[start:start + chunk], use_cache=False)
                except _Caught:
                    pass
    finally:
        handle.remove()
    return [(x.clone(), {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()})
            for x, kw in caught]


def _run_layer(layer, inputs) -> list[torch.Tensor]:
    outs = []
    with torch.inference_mode():
        for x, kw in inputs:
            y = layer(x, **kw)
            outs.append(y[0] if isinstance(y, tuple) else y)
    return outs


# ---- `toolpath compress --method gptq` ----------------------------------------------------------------------
class GPTQOptions(Calibration):
    bits: WholeBits = 4
    group_size: GroupSize = GROUP_SIZE
    act_order: bool = Field(False, description="quantize columns in order of decreasing Hessian diagonal")


class GPTQ:
    """GPTQ at one bit-width for every linear but the output head, calibrated on English text."""

    name = "gptq"
    packs = True  # writes packed low-bit weights (policies/packed_weights.py)
    Options = GPTQOptions

    def compress(self, source: str, out: Path, *, options: GPTQOptions, log) -> dict:
        from ..policies.packed_weights import save_packed
        from .options import calibration_fits
        from .source import load_source
        from .text import DESCRIPTION, calibration_batches

        model, tokenizer = load_source(source)
        calibration_fits(self.name, options.nsamples, options.seqlen, model.config.get_text_config().hidden_size)
        calib = calibration_batches(tokenizer, options.nsamples, options.seqlen, options.seed)
        quantized = quantize_model_gptq(model, calib, uniform_plan(options.bits), options.group_size,
                                        options.act_order)
        info = {"bits": options.bits, "group_size": options.group_size, "act_order": options.act_order,
                "damp": DAMP, "block": BLOCK, "quantized_tensors": len(quantized),
                "calibration": {"text": DESCRIPTION, "nsamples": options.nsamples, "seqlen": options.seqlen,
                                "seed": options.seed}}
        save_packed(model, tokenizer, quantized, out, {"method": self.name, **info})
        return info


KIND = GPTQ()

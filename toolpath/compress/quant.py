"""Group-wise asymmetric integer quantization of a weight matrix, the quantizer of rtn, gptq and moe-bits.

A row of W is cut into groups of `group_size` input columns; each group has a scale and an integer zero point:
    code = clamp(round(w / scale) + zero, 0, 2**bits - 1),     w ≈ scale * (code - zero)
the convention of the packed-weights format that stores them (policies/packed_weights.py: Quantized, the codes
packed by policies/bitpack.py).
"""

from __future__ import annotations

import torch

from ..policies.bitpack import check_bits
from ..policies.packed_weights import Quantized

GROUP_SIZE = 128


def group_params(w: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and zero point of each row of `w` (one group): min/max over the row, always including 0 so a
    zero weight stays exactly representable (as GPTQ's quantizer does)."""
    maxq = 2 ** bits - 1
    lo = torch.clamp(w.min(dim=1).values, max=0)
    hi = torch.clamp(w.max(dim=1).values, min=0)
    flat = (hi - lo) == 0
    lo, hi = torch.where(flat, -torch.ones_like(lo), lo), torch.where(flat, torch.ones_like(hi), hi)
    scale = (hi - lo) / maxq
    # Rounded through float16, the precision the scale is stored in, so quantizing and loading agree exactly.
    scale = scale.to(torch.float16).to(w.dtype)
    zero = torch.round(-lo / scale).clamp(0, maxq)
    return scale, zero


def quantize_with(w: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: int) -> torch.Tensor:
    """Integer codes of `w` [rows, cols] with per-row `scale` and `zero` [rows]."""
    return torch.clamp(torch.round(w / scale[:, None]) + zero[:, None], 0, 2 ** bits - 1)


def dequantize_with(codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    return scale[:, None] * (codes - zero[:, None])


def quantize_rtn(w: torch.Tensor, bits: int, group_size: int = GROUP_SIZE) -> Quantized:
    """Round-to-nearest, group by group: the baseline GPTQ improves on."""
    check_bits(bits)
    if w.dim() != 2:
        raise ValueError(f"expected a 2-D weight, got shape {tuple(w.shape)}")
    w = w.float()
    rows, cols = w.shape
    codes = torch.empty(rows, cols, dtype=torch.uint8)
    scales, zeros = [], []
    for start in range(0, cols, group_size):
        block = w[:, start:start + group_size]
        scale, zero = group_params(block, bits)
        codes[:, start:start + group_size] = quantize_with(block, scale, zero, bits).to(torch.uint8)
        scales.append(scale)
        zeros.append(zero)
    return Quantized(codes, torch.stack(scales, 1), torch.stack(zeros, 1).to(torch.uint8), bits, group_size)

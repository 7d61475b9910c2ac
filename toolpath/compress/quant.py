"""Group-wise asymmetric integer quantization of a weight matrix, and the bit packing that stores it.

A row of W is cut into groups of `group_size` input columns; each group has a scale and an integer zero point:
    code = clamp(round(w / scale) + zero, 0, 2**bits - 1),     w ≈ scale * (code - zero)
Codes of any width 1..8 are packed densely into a uint8 bit stream (code i takes bits i*b … i*b+b-1, lowest
first), so 3-bit codes cost 3 bits, not 4; the zero points are packed the same way, the scales kept as float16.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

GROUP_SIZE = 128


def check_bits(bits: int) -> int:
    if not isinstance(bits, (int, np.integer)) or not 1 <= int(bits) <= 8:
        raise ValueError(f"bits must be an integer from 1 to 8, got {bits!r}")
    return int(bits)


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


@dataclass
class Quantized:
    """A quantized matrix: codes [rows, cols] (uint8 values < 2**bits), scales and zeros [rows, groups]."""

    codes: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor
    bits: int
    group_size: int

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.codes.shape)

    def dequantize(self, dtype=torch.float32) -> torch.Tensor:
        rows, cols = self.codes.shape
        g = self.group_size
        index = torch.arange(cols) // g  # the group of each column
        scales = self.scales.to(dtype)[:, index]
        zeros = self.zeros.to(dtype)[:, index]
        return scales * (self.codes.to(dtype) - zeros)

    def pack(self) -> dict[str, torch.Tensor]:
        """The tensors stored in safetensors: packed codes and zeros (uint8 bit streams), float16 scales."""
        return {"codes": pack_bits(self.codes, self.bits), "zeros": pack_bits(self.zeros, self.bits),
                "scales": self.scales.to(torch.float16).contiguous()}

    @classmethod
    def unpack(cls, tensors: dict[str, torch.Tensor], shape: tuple[int, int], bits: int,
               group_size: int) -> "Quantized":
        rows, cols = shape
        groups = -(-cols // group_size)
        codes = unpack_bits(tensors["codes"], bits, rows * cols).reshape(rows, cols)
        zeros = unpack_bits(tensors["zeros"], bits, rows * groups).reshape(rows, groups)
        return cls(codes, tensors["scales"].float(), zeros, bits, group_size)


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


def pack_bits(values: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack integers 0 … 2**bits-1 densely into a flat uint8 tensor (little-endian bit order)."""
    check_bits(bits)
    v = values.reshape(-1).to(torch.uint8).numpy()
    if v.size and int(v.max()) >= 2 ** bits:
        raise ValueError(f"a value {int(v.max())} does not fit in {bits} bits")
    if bits == 8:
        return torch.from_numpy(v.copy())
    stream = np.unpackbits(v[:, None], axis=1, bitorder="little")[:, :bits]  # [n, bits], lowest bit first
    return torch.from_numpy(np.packbits(stream.reshape(-1), bitorder="little"))


def unpack_bits(packed: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """The first `count` integers of a stream pack_bits wrote, as uint8."""
    check_bits(bits)
    p = packed.reshape(-1).to(torch.uint8).numpy()
    if p.size * 8 < count * bits:
        raise ValueError(f"packed stream of {p.size} bytes is too short for {count} values of {bits} bits")
    if bits == 8:
        return torch.from_numpy(p[:count].copy())
    stream = np.unpackbits(p, bitorder="little")[:count * bits].reshape(count, bits)
    weights = (1 << np.arange(bits, dtype=np.uint16)).astype(np.uint16)
    return torch.from_numpy((stream.astype(np.uint16) @ weights).astype(np.uint8))

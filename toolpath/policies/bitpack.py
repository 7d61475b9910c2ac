"""The one bit codec: integer codes of 1 to 8 bits packed densely into uint8, along the last axis.

Code i of a row takes bits i*b … i*b+b-1 of the row's stream, lowest bit first, eight bits to a byte, lowest
first: 3-bit codes cost 3 bits, not 4, and a row of n codes takes ceil(n*b/8) bytes. 4-bit codes come out two to
a byte with the first in the low nibble, which is also ONNX Runtime's MatMulNBits layout, and a flat tensor packs
to the stream `toolpath compress` folders store (policies/packed_weights.py). A packed row's length depends only
on its own codes, so rows packed apart can be concatenated along the other axes (the kv caches append tokens).

What a code means (its scale and zero point) is the business of whoever quantizes: see packed_weights.py for
weights and kvcache/quant.py for keys and values.
"""

from __future__ import annotations

import numbers

import torch


def check_bits(bits) -> int:
    """`bits` as an int, or a ValueError when it is not a whole number from 1 to 8."""
    if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or not 1 <= int(bits) <= 8:
        raise ValueError(f"bits must be an integer from 1 to 8, got {bits!r}")
    return int(bits)


def _shifts(n: int, device) -> torch.Tensor:
    return torch.arange(n, device=device, dtype=torch.uint8)


def _to_bits(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """[..., n] codes -> [..., n*bits] of 0/1, each code's bits lowest first."""
    return ((codes.unsqueeze(-1) >> _shifts(bits, codes.device)) & 1).flatten(-2)


def _gather(bits: torch.Tensor, width: int) -> torch.Tensor:
    """[..., k, width] of 0/1 -> [..., k] uint8, bit j of each from column j (uint8 shifts and ors: cheaper than
    a weighted sum in a wider type, and these run on every step of a quantized kv cache)."""
    out = bits[..., 0].clone()
    for j in range(1, width):
        out |= bits[..., j] << j
    return out


def _from_bits(stream: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """The inverse of _to_bits: [..., >= n*bits] of 0/1 -> [..., n] uint8 codes."""
    return _gather(stream[..., :n * bits].unflatten(-1, (n, bits)), bits)


def _to_bytes(stream: torch.Tensor) -> torch.Tensor:
    """[..., m] of 0/1 -> [..., ceil(m/8)] uint8, eight bits a byte, lowest first (the last byte padded by 0)."""
    pad = (-stream.shape[-1]) % 8
    if pad:
        stream = torch.nn.functional.pad(stream, (0, pad))
    return _gather(stream.unflatten(-1, (-1, 8)), 8)


def _from_bytes(packed: torch.Tensor) -> torch.Tensor:
    """[..., k] uint8 -> [..., 8k] of 0/1, lowest bit first."""
    return _to_bits(packed.to(torch.uint8), 8)


def pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes `[..., n]` (each < 2**bits) -> `[..., ceil(n * bits / 8)]` uint8."""
    bits = check_bits(bits)
    codes = codes.to(torch.uint8)
    if codes.numel() and int(codes.max()) >= 1 << bits:
        raise ValueError(f"a value {int(codes.max())} does not fit in {bits} bits")
    if bits == 8:
        return codes.contiguous().clone()
    return _to_bytes(_to_bits(codes, bits))


def unpack(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """The first `n` codes of each row pack wrote: `[..., bytes]` -> `[..., n]` uint8."""
    bits = check_bits(bits)
    if packed.shape[-1] * 8 < n * bits:
        raise ValueError(f"packed stream of {packed.shape[-1]} bytes is too short for {n} values of {bits} bits")
    if bits == 8:
        return packed[..., :n].to(torch.uint8).clone()
    return _from_bits(_from_bytes(packed), bits, n)


def pack_stream(codes: list[torch.Tensor], bits: list[int]) -> torch.Tensor:
    """Codes of several widths (`codes[i]`: `[..., n_i]`, each < 2**bits[i]) -> one `[..., ceil(sum(bits_i *
    n_i) / 8)]` uint8 stream: class after class, so the classes share one padding to a whole byte."""
    return _to_bytes(torch.cat([_to_bits(q.to(torch.uint8), check_bits(b)) for q, b in zip(codes, bits)], dim=-1))


def unpack_stream(packed: torch.Tensor, bits: list[int], sizes: list[int]) -> list[torch.Tensor]:
    """The inverse of pack_stream: the codes of each class, `[..., sizes[i]]` uint8."""
    stream = _from_bytes(packed)
    out, at = [], 0
    for b, n in zip(bits, sizes):
        out.append(_from_bits(stream[..., at:at + b * n], b, n))
        at += b * n
    return out

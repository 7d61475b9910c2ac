"""Asymmetric integer quantization and bit packing, the pieces both quantized caches are made of.

A codec turns a block of keys or values `[batch, heads, tokens, channels]` into stored tensors whose axis 2
grows with the tokens (so blocks are appended by concatenation, never re-quantized) and back:
    ChannelCodec  per channel, over groups of G tokens   (KIVI's keys: outlier channels keep their own range)
    TokenCodec    per token, over groups of G channels   (KIVI's values)
    FP8Codec      float8_e4m3fn with a per-channel scale over groups of G tokens
Integers are packed as bit planes: b-bit codes take exactly b bits each (b = 1..8), so 3-bit classes cost
3 bits, not a byte; `pack_stream` puts codes of several widths into one stream per token, so classes of
mixed widths share the padding to a whole byte. Scales and zero points are float16.
"""

from __future__ import annotations

import torch

EPS = 1e-6  # the smallest step, so a constant group does not divide by zero


def _weights(device: torch.device) -> torch.Tensor:
    return (1 << torch.arange(8, device=device, dtype=torch.int32)).to(torch.uint8)


def pack(q: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes `[..., n]` (uint8, each < 2^bits) -> `[..., bits * ceil(n / 8)]` uint8: plane i holds bit i of
    eight codes per byte."""
    n = q.shape[-1]
    pad = (-n) % 8
    if pad:
        q = torch.nn.functional.pad(q, (0, pad))
    planes = torch.stack([(q >> i) & 1 for i in range(bits)], dim=-2)  # [..., bits, n8*8]
    planes = planes.reshape(*planes.shape[:-1], -1, 8)
    packed = (planes * _weights(q.device)).sum(-1, dtype=torch.int32).to(torch.uint8)  # [..., bits, n8]
    return packed.reshape(*packed.shape[:-2], -1)


def unpack(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """The inverse of pack: `[..., bits * ceil(n / 8)]` -> codes `[..., n]` uint8."""
    planes = packed.reshape(*packed.shape[:-1], bits, -1)
    bitsets = (planes.unsqueeze(-1) & _weights(packed.device)) != 0  # [..., bits, n8, 8]
    bitsets = bitsets.reshape(*bitsets.shape[:-2], -1)[..., :n].to(torch.uint8)  # [..., bits, n]
    out = bitsets[..., 0, :].clone()
    for i in range(1, bits):
        out |= bitsets[..., i, :] << i
    return out


def pack_stream(codes: list[torch.Tensor], bits: list[int]) -> torch.Tensor:
    """Codes of several widths (`codes[i]`: `[..., n_i]`, each < 2^bits[i]) -> one `[..., ceil(sum(bits_i *
    n_i) / 8)]` uint8 stream: every code's bits, class after class, eight to a byte."""
    planes = [torch.stack([(q >> i) & 1 for i in range(b)], dim=-2).flatten(-2) for q, b in zip(codes, bits)]
    return pack(torch.cat(planes, dim=-1), 1)


def unpack_stream(packed: torch.Tensor, bits: list[int], sizes: list[int]) -> list[torch.Tensor]:
    """The inverse of pack_stream: the codes of each class, `[..., sizes[i]]` uint8."""
    flat = unpack(packed, 1, sum(b * n for b, n in zip(bits, sizes)))
    out, at = [], 0
    for b, n in zip(bits, sizes):
        planes = flat[..., at:at + b * n].unflatten(-1, (b, n))
        q = planes[..., 0, :].clone()
        for i in range(1, b):
            q |= planes[..., i, :] << i
        out.append(q)
        at += b * n
    return out


def quantize(x: torch.Tensor, bits: int, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric min/max quantization reducing over `dim`: codes (uint8), scale and zero (float16, keepdim).
    Codes are computed from the float16 scale and zero that are stored, so decoding sees what encoding saw."""
    levels = (1 << bits) - 1
    lo = x.amin(dim=dim, keepdim=True)
    hi = x.amax(dim=dim, keepdim=True)
    scale = ((hi - lo).clamp_min(EPS) / levels).to(torch.float16).clamp_min(EPS)
    zero = lo.to(torch.float16)
    q = ((x - zero.to(x.dtype)) / scale.to(x.dtype)).round_().clamp_(0, levels).to(torch.uint8)
    return q, scale, zero


def dequantize(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return q.to(dtype) * scale.to(dtype) + zero.to(dtype)


class ChannelCodec:
    """Per-channel quantization over groups of `group` tokens: a block of n tokens (n a multiple of the group)
    -> (packed codes [B, H, n, bytes], scale and zero [B, H, n / group, C])."""

    def __init__(self, bits: int, group: int):
        self.bits, self.group = bits, group

    def codes(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(codes [B, H, n, C] unpacked, scale, zero)."""
        b, h, n, c = x.shape
        if n % self.group:
            raise ValueError(f"a key block of {n} tokens is not a multiple of the group ({self.group})")
        q, scale, zero = quantize(x.reshape(b, h, n // self.group, self.group, c), self.bits, dim=3)
        return q.reshape(b, h, n, c), scale.squeeze(3), zero.squeeze(3)

    def from_codes(self, q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        b, h, n, c = q.shape
        q = q.reshape(b, h, n // self.group, self.group, c)
        return dequantize(q, scale.unsqueeze(3), zero.unsqueeze(3), dtype).reshape(b, h, n, c)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q, scale, zero = self.codes(x)
        return pack(q, self.bits), scale, zero

    def decode(self, parts: tuple[torch.Tensor, ...], channels: int, dtype: torch.dtype) -> torch.Tensor:
        packed, scale, zero = parts
        return self.from_codes(unpack(packed, self.bits, channels), scale, zero, dtype)


class TokenCodec:
    """Per-token quantization over groups of about `group` channels (padded by repeating the last channel,
    which leaves its group's min and max unchanged): -> (packed codes, scale and zero [B, H, n, groups])."""

    def __init__(self, bits: int, group: int):
        self.bits, self.group = bits, group

    def width(self, c: int) -> int:
        """Channels per group: c // group groups (at least one), as even as padding allows, so a class of
        176 channels is 5 groups of 36 rather than 6 with a short last one (a scale and zero per group cost)."""
        k = max(1, c // self.group)
        return -(-c // k)

    def codes(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(codes [B, H, n, C] unpacked, scale, zero); the padding channels' codes are not kept (they repeat
        the last channel's)."""
        b, h, n, c = x.shape
        g = self.width(c)
        pad = (-c) % g
        if pad:
            x = torch.cat([x, x[..., -1:].expand(b, h, n, pad)], dim=-1)
        q, scale, zero = quantize(x.reshape(b, h, n, -1, g), self.bits, dim=4)
        return q.reshape(b, h, n, -1)[..., :c], scale.squeeze(4), zero.squeeze(4)

    def from_codes(self, q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        b, h, n, c = q.shape
        g = self.width(c)
        pad = (-c) % g
        if pad:
            q = torch.cat([q, q[..., -1:].expand(b, h, n, pad)], dim=-1)
        x = dequantize(q.reshape(b, h, n, -1, g), scale.unsqueeze(4), zero.unsqueeze(4), dtype)
        return x.reshape(b, h, n, -1)[..., :c]

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q, scale, zero = self.codes(x)
        return pack(q, self.bits), scale, zero

    def decode(self, parts: tuple[torch.Tensor, ...], channels: int, dtype: torch.dtype) -> torch.Tensor:
        packed, scale, zero = parts
        return self.from_codes(unpack(packed, self.bits, channels), scale, zero, dtype)


class FP8Codec:
    """float8_e4m3fn with a float16 per-channel scale over groups of `group` tokens (absmax to the format's
    largest value, 448), so channels of any range keep e4m3's relative precision."""

    bits = 8
    MAX = 448.0

    def __init__(self, group: int):
        self.group = group

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, h, n, c = x.shape
        xg = x.reshape(b, h, n // self.group, self.group, c)
        scale = (xg.abs().amax(dim=3, keepdim=True) / self.MAX).to(torch.float16).clamp_min(EPS)
        codes = (xg / scale.to(x.dtype)).clamp(-self.MAX, self.MAX).to(torch.float8_e4m3fn)
        return codes.reshape(b, h, n, c), scale.squeeze(3)

    def decode(self, parts: tuple[torch.Tensor, ...], channels: int, dtype: torch.dtype) -> torch.Tensor:
        codes, scale = parts
        b, h, n, c = codes.shape
        x = codes.to(dtype).reshape(b, h, n // self.group, self.group, c) * scale.unsqueeze(3).to(dtype)
        return x.reshape(b, h, n, c)


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)

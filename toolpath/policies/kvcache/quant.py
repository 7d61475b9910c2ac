"""Asymmetric integer quantization of keys and values, the pieces both quantized caches are made of.

A codec turns a block of keys or values `[batch, heads, tokens, channels]` into stored tensors whose axis 2
grows with the tokens (so blocks are appended by concatenation, never re-quantized) and back:
    ChannelCodec  per channel, over groups of G tokens   (KIVI's keys: outlier channels keep their own range)
    TokenCodec    per token, over groups of G channels   (KIVI's values)
    FP8Codec      float8_e4m3fn with a per-channel scale over groups of G tokens
Integers are packed by the one bit codec (policies/bitpack.py): b-bit codes take exactly b bits each (b =
1..8), so 3-bit classes cost 3 bits, not a byte; `pack_stream` puts codes of several widths into one stream per
token, so classes of mixed widths share the padding to a whole byte. Scales and zero points are float16.

Why not the weights' convention (policies/packed_weights.py, an integer zero point and a range that always holds
0): keys and values are activations, often far from 0 on one side (a key channel's outlier sits at +25, never
near 0), so stretching the range to 0 would waste levels; the zero is the group's float16 minimum, x ≈ code *
scale + min, stored beside the scale, and never needs to be exact at 0.
"""

from __future__ import annotations

import torch

from ..bitpack import pack, pack_stream, unpack, unpack_stream

__all__ = ["ChannelCodec", "FP8Codec", "TokenCodec", "dequantize", "nbytes", "pack", "pack_stream", "quantize",
           "unpack", "unpack_stream"]

EPS = 1e-6  # the smallest step, so a constant group does not divide by zero


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


class _GroupCodec:
    """What both min/max codecs share: `codes(x)` -> (codes, scale, zero) and `from_codes` back; the codes are
    stored packed at `bits` each."""

    def __init__(self, bits: int, group: int):
        self.bits, self.group = bits, group

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q, scale, zero = self.codes(x)
        return pack(q, self.bits), scale, zero

    def decode(self, parts: tuple[torch.Tensor, ...], channels: int, dtype: torch.dtype) -> torch.Tensor:
        packed, scale, zero = parts
        return self.from_codes(unpack(packed, self.bits, channels), scale, zero, dtype)


class ChannelCodec(_GroupCodec):
    """Per-channel quantization over groups of `group` tokens: a block of n tokens (n a multiple of the group)
    -> (packed codes [B, H, n, bytes], scale and zero [B, H, n / group, C])."""

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


class TokenCodec(_GroupCodec):
    """Per-token quantization over groups of about `group` channels (padded by repeating the last channel,
    which leaves its group's min and max unchanged): -> (packed codes, scale and zero [B, H, n, groups])."""

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

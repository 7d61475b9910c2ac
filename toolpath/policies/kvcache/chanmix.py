"""ChanMix: mixed precision across channels. Each key and value channel of each layer gets a class by its
measured quantization sensitivity (calibrate.py), each class its bit-width, so that the channels' average is
the requested `bits` (2 by default):

    4 bits  retrieval-critical   the channels whose error costs attention most (large queries on them)
    3 bits  outlier              channels with a wide range, whose error is large at few bits
    2 bits  normal
    1 bit   sub-normal           channels the queries barely read, or values o_proj barely passes on
    fp8     (option `fp8`)       float8_e4m3fn instead of integers for the costliest channels (8 bits)

The paper describes the classes but its code is not public; the classification here is derived as follows,
each choice deliberate:
- The classes are not thresholds on a statistic but the solution of the allocation problem the paper poses:
  minimise the summed cost (calibrate.py: a channel's expected squared error in the attention logits for
  keys, in the attention output for values) under the bit budget. Starting with every channel at 1 bit, the
  step with the largest cost reduction per bit is taken until the budget (bits x channels) is spent: with
  costs that fall convexly with bits, as quantization error does, this greedy choice is optimal.
- Keys and values are allocated separately, each at the requested average (the cache's bytes split evenly).
- Each layer is allocated on its own: every layer then holds the same bytes, so a long context costs the
  same per layer as KIVI at the same bits.
- Keys are quantized per channel over groups of G tokens (as KIVI), each channel at its class's bits.
- Values are quantized per token over groups of about G channels formed across all classes, channels sorted
  by class and then magnitude (a group's range fits its channels, and only where two classes meet does a
  group mix bit-widths): each group stores one float16 minimum and range per
  token, and each channel reads its step from that range at its own bits (range / (2^b - 1)). Groups per
  class would add a partial group (a scale and zero) per class and token; shared groups cost exactly KIVI's
  scales, so chanmix at `bits` holds KIVI's bytes at `bits` plus at most a byte of padding per class.
- A fp8 step costs 4 bits more than 4-bit integers; when the last bits of the budget cannot pay for one, they
  go to cheaper steps, so with fp8 the average may fall short of `bits` by under 4 bits per layer in total.
"""

from __future__ import annotations

import heapq
from typing import Any

from .options import attention_refusal, boolean, integer, known_only

OPTIONS = {"bits": "the average bits per channel, 1 to 4 (16: no quantization); default 2",
           "fp8": "store the costliest channels as float8_e4m3fn (8 bits) instead of 4-bit integers; default false",
           "group": "G, tokens per key group and channels per value group; default 32",
           "residual": "R, recent tokens kept in full precision, a multiple of G; default 32"}


def validate(options: dict[str, Any]) -> dict[str, Any]:
    known_only(options, OPTIONS, "chanmix")
    bits = integer(options, "bits", 2, choices=(1, 2, 3, 4, 16))
    group = integer(options, "group", 32, minimum=1)
    residual = integer(options, "residual", group, minimum=group)
    if residual % group:
        raise ValueError(f"kv_cache.residual: must be a multiple of kv_cache.group ({group}), got {residual}")
    return {"bits": bits, "fp8": boolean(options, "fp8", False), "group": group, "residual": residual}


def refuse(config: Any) -> str | None:
    return attention_refusal(config)


def allocate(costs: dict[str, list[float]], bits: float, fp8: bool = False) -> list[int]:
    """Bits per channel (1, 2, 3, 4, or 8 for fp8) minimising the summed cost with sum(bits) <= bits x channels,
    by the greedy cost-per-bit rule described above. `costs`: level ("1".."4", "8") -> cost per channel."""
    levels = [1, 2, 3, 4] + ([8] if fp8 else [])
    n = len(costs["1"])
    budget = int(round(bits * n)) - n
    if budget < 0:
        raise ValueError(f"kv_cache.bits: at least 1 bit per channel, got {bits}")
    chosen = [0] * n  # index into levels

    def step(c: int):
        lv = chosen[c]
        if lv + 1 >= len(levels):
            return None
        extra = levels[lv + 1] - levels[lv]
        gain = costs[str(levels[lv])][c] - costs[str(levels[lv + 1])][c]
        return (-gain / extra, c, extra)

    heap = [s for s in (step(c) for c in range(n)) if s is not None]
    heapq.heapify(heap)
    skipped = []
    while heap and budget > 0:
        s = heapq.heappop(heap)
        _, c, extra = s
        if extra > budget:  # an fp8 step the remaining bits cannot pay for
            skipped.append(s)
            continue
        chosen[c] += 1
        budget -= extra
        nxt = step(c)
        if nxt is not None:
            heapq.heappush(heap, nxt)
    return [levels[i] for i in chosen]


class MixedCodec:
    """Keys: the channels of every KV head flattened, split into classes of one bit-width each, each class
    encoded per channel over groups of G tokens (ChannelCodec; 8 bits: FP8Codec)."""

    def __init__(self, bits_per_channel: list[int], heads: int, head_dim: int, group: int):
        import torch

        from .quant import ChannelCodec, FP8Codec

        self.heads, self.head_dim = heads, head_dim
        self.classes = []
        for b in sorted(set(bits_per_channel)):
            idx = [c for c, x in enumerate(bits_per_channel) if x == b]
            codec = FP8Codec(group) if b == 8 else ChannelCodec(b, group)
            self.classes.append((b, torch.tensor(idx, dtype=torch.long), codec, 2 if b == 8 else 3))

    def encode(self, x):
        flat = _flatten(x)
        parts = []
        for _, idx, codec, _ in self.classes:
            parts.extend(codec.encode(flat[..., idx.to(x.device)].contiguous()))
        return tuple(parts)

    def decode(self, parts, channels, dtype):  # `channels`: the head_dim, known here already
        out = _empty(parts[0], self.heads * self.head_dim, dtype)
        i = 0
        for _, idx, codec, count in self.classes:
            out[..., idx.to(out.device)] = codec.decode(parts[i:i + count], len(idx), dtype)
            i += count
        return _unflatten(out, self.heads, self.head_dim)


class SharedGroupValues:
    """Values: per token, groups of about G channels formed across classes (channels sorted by class, then by
    `order`, their magnitude), one float16 minimum and range per group and token; each integer class packs its codes at its
    own bits, stepping by range / (2^b - 1) of its channels' groups. fp8 channels are encoded apart (FP8Codec)
    and take no part in the groups."""

    def __init__(self, bits_per_channel: list[int], heads: int, head_dim: int, group: int, order: list[float]):
        import torch

        from .quant import FP8Codec, TokenCodec

        self.heads, self.head_dim = heads, head_dim
        # by class, then magnitude: a group holds channels of one bit-width except where two classes meet
        ints = sorted((c for c, b in enumerate(bits_per_channel) if b != 8),
                      key=lambda c: (bits_per_channel[c], order[c]))
        width = TokenCodec(2, group).width(len(ints)) if ints else 1
        self.perm = torch.tensor(ints, dtype=torch.long)
        self.groups = -(-len(ints) // width)
        self.width = width
        group_of = {c: i // width for i, c in enumerate(ints)}
        self.classes = []  # (bits, channel indices, their group indices)
        for b in sorted({bits_per_channel[c] for c in ints}):
            idx = [c for c in ints if bits_per_channel[c] == b]
            self.classes.append((b, torch.tensor(idx, dtype=torch.long),
                                 torch.tensor([group_of[c] for c in idx], dtype=torch.long)))
        fp8 = [c for c, b in enumerate(bits_per_channel) if b == 8]
        self.fp8 = (torch.tensor(fp8, dtype=torch.long), FP8Codec(group)) if fp8 else None

    def encode(self, x):
        import torch

        from .quant import EPS, pack

        flat = _flatten(x)
        b, _, n, _ = flat.shape
        grouped = flat[..., self.perm.to(x.device)]
        pad = self.groups * self.width - grouped.shape[-1]
        if pad:  # repeating the last channel leaves its group's min and max unchanged
            grouped = torch.cat([grouped, grouped[..., -1:].expand(b, 1, n, pad)], dim=-1)
        grouped = grouped.reshape(b, 1, n, self.groups, self.width)
        lo = grouped.amin(-1).to(torch.float16)
        span = (grouped.amax(-1) - lo.to(x.dtype)).clamp_min(EPS).to(torch.float16)
        parts = [lo, span]
        for bits, idx, gid in self.classes:
            levels = (1 << bits) - 1
            step = (span.to(x.dtype)[..., gid.to(x.device)] / levels).clamp_min(EPS)
            zero = lo.to(x.dtype)[..., gid.to(x.device)]
            q = ((flat[..., idx.to(x.device)] - zero) / step).round_().clamp_(0, levels).to(torch.uint8)
            parts.append(pack(q, bits))
        if self.fp8 is not None:
            parts.extend(self.fp8[1].encode(flat[..., self.fp8[0].to(x.device)].contiguous()))
        return tuple(parts)

    def decode(self, parts, channels, dtype):
        from .quant import EPS, unpack

        lo, span = parts[0].to(dtype), parts[1].to(dtype)
        out = _empty(parts[0], self.heads * self.head_dim, dtype)
        for i, (bits, idx, gid) in enumerate(self.classes):
            levels = (1 << bits) - 1
            q = unpack(parts[2 + i], bits, len(idx)).to(dtype)
            g = gid.to(out.device)
            out[..., idx.to(out.device)] = q * (span[..., g] / levels).clamp_min(EPS) + lo[..., g]
        if self.fp8 is not None:
            rest = parts[2 + len(self.classes):]
            out[..., self.fp8[0].to(out.device)] = self.fp8[1].decode(rest, len(self.fp8[0]), dtype)
        return _unflatten(out, self.heads, self.head_dim)


def _flatten(x):
    """[batch, heads, tokens, head_dim] -> [batch, 1, tokens, heads * head_dim]: classes span the KV heads."""
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, 1, n, h * d)


def _unflatten(x, heads: int, head_dim: int):
    b, _, n, _ = x.shape
    return x.reshape(b, n, heads, head_dim).transpose(1, 2)


def _empty(like, channels: int, dtype):
    import torch

    b, _, n = like.shape[:3]  # every stored part is [batch, 1, tokens, ...]
    return torch.empty(b, 1, n, channels, dtype=dtype, device=like.device)


def attach(model: Any, bits: int = 2, fp8: bool = False, group: int = 32, residual: int = 32):
    from . import calibrate
    from .layers import FullLayer, KVCache, QuantizedLayer

    text = model.config.get_text_config()
    if bits == 16:
        return KVCache([FullLayer() for _ in range(text.num_hidden_layers)])
    prof = calibrate.profile(model, group=group)
    layers = []
    for layer in prof["layers"]:
        kbits = allocate(layer["keys"], bits, fp8)
        vbits = allocate(layer["values"], bits, fp8)
        kc = MixedCodec(kbits, prof["kv_heads"], prof["head_dim"], group)
        vc = SharedGroupValues(vbits, prof["kv_heads"], prof["head_dim"], group, order=layer["value_rms"])
        layers.append(QuantizedLayer(kc, vc, group, residual))
    return KVCache(layers)

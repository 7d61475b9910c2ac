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
  same per layer as KIVI at the same bits. One budget across all layers was measured and is worse (it starved
  the first layers' values; docs/results/kvcache.md): the costs are local to a layer (its logits' or its
  output's error) and say nothing of how an error grows through the layers above, so they do not compare
  between layers.
- Channels of one class are quantized together: keys per channel over groups of G tokens (as KIVI), values
  per token over groups of about G channels of one class, sorted by magnitude so a group's range fits its
  channels. Values grouped per channel over G tokens as the keys are (each channel's cost then measured, not
  the proxy) were measured and are worse on both models tried, though their plain squared error is lower
  (docs/results/kvcache.md). The codes of all classes share one bit stream per token (no per-class padding to a byte).
- The sequence's first token (`sinks`, default 1) stays in full precision, keys and values (sink_layer.py): most
  heads put a large share of their attention on it, so its errors are read at full weight, and its key is an
  outlier that would stretch its group's ranges. It costs its fp16 bytes once per sequence. `classes` chooses
  the sides that get channel classes (the other side stores every channel at `bits` as KIVI does): the
  benchmark's ablation of the values' classes against KIVI's values.
- A fp8 step costs 4 bits more than 4-bit integers; when the last bits of the budget cannot pay for one, they
  go to cheaper steps, so with fp8 the average may fall short of `bits` by under 4 bits per layer in total.
"""

from __future__ import annotations

import heapq
from typing import Annotated, Any, Literal

from pydantic import Field

from .kind import NUMBER_TEXT, CacheKind, QuantizedOptions, Whole


class Options(QuantizedOptions):
    bits: Annotated[Literal[1, 2, 3, 4, 16], NUMBER_TEXT] = Field(
        2, description="the average bits per channel, 1 to 4 (16: no quantization)")
    fp8: bool = Field(False, description="store the costliest channels as float8_e4m3fn (8 bits) instead of "
                                         "4-bit integers")
    sinks: Whole = Field(1, ge=0, description="first tokens of the sequence kept in full precision (the attention "
                                              "sink; sink_layer.py)")
    classes: Literal["both", "keys", "values", "none"] = Field(
        "both", description="which side gets channel classes; the other stores every channel at `bits` as KIVI "
                            "does (an ablation: 'keys' measures the classes' values against KIVI's)")


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
    """Channels of every KV head flattened, split into classes of one bit-width each, each class quantized by
    its own codec (keys: ChannelCodec; values: TokenCodec; 8 bits: FP8Codec). The integer classes' codes of a
    token share one packed stream (quant.pack_stream), so no class pays its own padding to a whole byte.
    Stored parts: (stream, scale and zero of each integer class, codes and scale of the fp8 class if any)."""

    def __init__(self, bits_per_channel: list[int], heads: int, head_dim: int, group: int, per_token: bool,
                 order: list[float] | None = None):
        import torch

        from .quant import ChannelCodec, FP8Codec, TokenCodec

        self.heads, self.head_dim = heads, head_dim
        self.classes, self.fp8 = [], None
        for b in sorted(set(bits_per_channel)):
            idx = [c for c, x in enumerate(bits_per_channel) if x == b]
            if order is not None:  # channels of similar magnitude share a value group
                idx.sort(key=lambda c: order[c])
            idx = torch.tensor(idx, dtype=torch.long)
            if b == 8:
                self.fp8 = (idx, FP8Codec(group))
            else:
                self.classes.append((b, idx, (TokenCodec if per_token else ChannelCodec)(b, group)))
        self.bits = [b for b, _, _ in self.classes]
        self.sizes = [len(idx) for _, idx, _ in self.classes]

    def encode(self, x):
        from .quant import pack_stream

        b, h, n, d = x.shape
        flat = x.transpose(1, 2).reshape(b, 1, n, h * d)
        codes, params = [], []
        for _, idx, codec in self.classes:
            q, scale, zero = codec.codes(flat[..., idx.to(x.device)].contiguous())
            codes.append(q)
            params += [scale, zero]
        parts = ([pack_stream(codes, self.bits)] if codes else []) + params
        if self.fp8 is not None:
            idx, codec = self.fp8
            parts.extend(codec.encode(flat[..., idx.to(x.device)].contiguous()))
        return tuple(parts)

    def decode(self, parts, channels, dtype):  # `channels`: the head_dim, known here already
        import torch

        from .quant import unpack_stream

        b, _, n = parts[0].shape[:3]  # every part is [batch, 1, tokens, ...]
        out = torch.empty(b, 1, n, self.heads * self.head_dim, dtype=dtype, device=parts[0].device)
        i = 0
        if self.classes:
            codes = unpack_stream(parts[0], self.bits, self.sizes)
            i = 1
            for (_, idx, codec), q in zip(self.classes, codes):
                out[..., idx.to(out.device)] = codec.from_codes(q, parts[i], parts[i + 1], dtype)
                i += 2
        if self.fp8 is not None:
            idx, codec = self.fp8
            out[..., idx.to(out.device)] = codec.decode(parts[i:i + 2], len(idx), dtype)
        return out.reshape(b, n, self.heads, self.head_dim).transpose(1, 2)


def attach(model: Any, options: Options):
    from . import calibrate
    from .cache import KVCache
    from .quant import ChannelCodec, TokenCodec
    from .quantized_layer import FullLayer
    from .sink_layer import SinkLayer

    text = model.config.get_text_config()
    if options.bits == 16:
        return KVCache([FullLayer() for _ in range(text.num_hidden_layers)])
    prof = calibrate.profile(model, group=options.group)
    g, layers = options.group, []
    for layer in prof["layers"]:
        if options.classes in ("both", "keys"):
            kc = MixedCodec(allocate(layer["keys"], options.bits, options.fp8), prof["kv_heads"], prof["head_dim"],
                            g, per_token=False)
        else:
            kc = ChannelCodec(options.bits, g)
        if options.classes in ("both", "values"):
            vc = MixedCodec(allocate(layer["values"], options.bits, options.fp8), prof["kv_heads"],
                            prof["head_dim"], g, per_token=True, order=layer["value_rms"])
        else:
            vc = TokenCodec(options.bits, g)
        layers.append(SinkLayer(kc, vc, g, options.residual, options.sinks))
    return KVCache(layers)


KIND = CacheKind("chanmix", "bits", Options, attach)

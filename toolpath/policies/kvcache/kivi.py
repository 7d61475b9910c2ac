"""KIVI (Liu et al. 2024, "KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache"): keys quantized per
channel over groups of G tokens, values per token over groups of G channels, asymmetric min/max, `bits` 2 or 4;
the most recent tokens (at most R) stay in full precision and are flushed into the quantized store G tokens at
a time. Each flushed block is quantized once and appended: the store is never re-quantized (transformers'
QuantizedCache re-quantizes everything at each flush and its error compounds). bits=16 is a plain DynamicCache.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .kind import NUMBER_TEXT, CacheKind, QuantizedOptions


class Options(QuantizedOptions):
    bits: Annotated[Literal[2, 4, 16], NUMBER_TEXT] = Field(
        2, description="2 or 4 (16: no quantization, a plain DynamicCache)")


def attach(model: Any, options: Options):
    from .cache import KVCache
    from .quant import ChannelCodec, TokenCodec
    from .quantized_layer import FullLayer, QuantizedLayer

    layers = model.config.get_text_config().num_hidden_layers
    if options.bits == 16:
        return KVCache([FullLayer() for _ in range(layers)])
    g, r = options.group, options.residual
    return KVCache([QuantizedLayer(ChannelCodec(options.bits, g), TokenCodec(options.bits, g), g, r)
                    for _ in range(layers)])


KIND = CacheKind("kivi", "bits", Options, attach)

"""KIVI (Liu et al. 2024, "KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache"): keys quantized per
channel over groups of G tokens, values per token over groups of G channels, asymmetric min/max, `bits` 2 or 4;
the most recent tokens (at most R) stay in full precision and are flushed into the quantized store G tokens at
a time. Each flushed block is quantized once and appended: the store is never re-quantized (transformers'
QuantizedCache re-quantizes everything at each flush and its error compounds). bits=16 is a plain DynamicCache.
"""

from __future__ import annotations

from typing import Any

from .options import attention_refusal, integer, known_only

OPTIONS = {"bits": "2 or 4 (16: no quantization, a plain DynamicCache); default 2",
           "group": "G, tokens per key group and channels per value group; default 32",
           "residual": "R, recent tokens kept in full precision, a multiple of G; default 32"}


def validate(options: dict[str, Any]) -> dict[str, Any]:
    known_only(options, OPTIONS, "kivi")
    bits = integer(options, "bits", 2, choices=(2, 4, 16))
    group = integer(options, "group", 32, minimum=1)
    residual = integer(options, "residual", group, minimum=group)
    if residual % group:
        raise ValueError(f"kv_cache.residual: must be a multiple of kv_cache.group ({group}), got {residual}")
    return {"bits": bits, "group": group, "residual": residual}


def refuse(config: Any) -> str | None:
    return attention_refusal(config)


def attach(model: Any, bits: int = 2, group: int = 32, residual: int = 32):
    from .layers import FullLayer, KVCache, QuantizedLayer
    from .quant import ChannelCodec, TokenCodec

    layers = model.config.get_text_config().num_hidden_layers
    if bits == 16:
        return KVCache([FullLayer() for _ in range(layers)])
    return KVCache([QuantizedLayer(ChannelCodec(bits, group), TokenCodec(bits, group), group, residual)
                    for _ in range(layers)])

"""ChanMix's calibration: how much each key and value channel of each layer costs at each bit-width, measured
once per model on English text and saved under $TOOLPATH_HOME/kvcache/<model-id>.json.

The text is the calibration split of Python's `pydoc_data.topics` (sorted keys, the first 80 %; benchmarks
evaluate on the last 20 %). One forward pass over it fills a DynamicCache with every layer's keys (after RoPE)
and values; a hook on each `q_proj` records the queries' mean square per channel.

The cost of channel d at b bits (the quantity the allocation in chanmix.py minimises), written down:
- keys: E[q_d^2] x MSE_d(b). A key error e_d moves the attention logit q.k by q_d e_d, so its expected square is
  E[q_d^2] E[e_d^2]. MSE_d(b) is measured by quantizing the calibration keys exactly as the cache does
  (per channel, groups of G tokens). Queries are recorded before RoPE: RoPE rotates channel pairs (d, d + D/2)
  together, so the pair's mean square is unchanged by it and each channel of the pair gets the pair's mean.
  Query heads sharing a KV head (GQA) are averaged.
- values: w_d x RMS_d^2 / (2^b - 1)^2. A value error reaches the output through o_proj; w_d is the squared norm
  of o_proj's columns reading channel d (summed over the query heads sharing it). Values are quantized per
  token over groups of channels, so a channel's step is its group's range over 2^b - 1; chanmix groups
  channels of one class by magnitude, so the group range is taken as proportional to the channel's own RMS.
  Measuring the error instead (per-token quantization of the calibration values in magnitude-sorted groups)
  was tried and allocated worse (docs/results/kvcache.md).
- fp8 (8 bits in the tables): measured like the integer levels, through float8_e4m3fn with a per-channel scale.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...paths import home
from ...progress import Progress
from ...pydoc_text import calibration_text

LEVELS = (1, 2, 3, 4, 8)  # 8: float8_e4m3fn
CALIBRATION_TOKENS = 1024
VERSION = 1


def model_id(model: Any) -> str:
    """A file name for the model: its folder's name and its fingerprint, so two models of one name (a
    re-conversion, a fine-tune) do not share a profile."""
    from ..fingerprint import model_fingerprint

    base = Path(str(getattr(model.config, "_name_or_path", "") or "model")).name or "model"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in base) + "-" + model_fingerprint(model)[:12]


def profile_path(model: Any) -> Path:
    return home() / "kvcache" / f"{model_id(model)}.json"


def _tokenizer_for(model: Any):
    from transformers import AutoTokenizer

    folder = Path(str(getattr(model.config, "_name_or_path", "") or ""))
    if not (folder / "config.json").is_file():
        raise ValueError("kv_cache.kind: chanmix needs a calibration profile and this model has no folder to read a "
                         "tokenizer from; call toolpath.policies.kvcache.calibrate.profile(model, ids=...) first")
    return AutoTokenizer.from_pretrained(str(folder))


def calibration_ids(tokenizer) -> Any:
    """The calibration text's first CALIBRATION_TOKENS tokens [1, n]. A prefix of the text is tokenized first (no
    token is longer than 16 characters in practice), the whole text only when the prefix is short of tokens
    (a margin of 64 keeps the word the prefix cuts, whose tokens may differ, out of the ids): the same ids,
    without tokenizing a third of a megabyte for a thousand of them."""
    text = calibration_text()
    ids = tokenizer(text[:CALIBRATION_TOKENS * 16], return_tensors="pt")["input_ids"]
    if ids.shape[1] < CALIBRATION_TOKENS + 64:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
    return ids[:, :CALIBRATION_TOKENS]


def profile(model: Any, ids=None, group: int = 32) -> dict:
    """The model's saved profile, or a new one measured on `ids` (token ids [1, n]; default: the calibration
    text's first CALIBRATION_TOKENS tokens) and saved."""
    path = profile_path(model)
    if path.is_file():
        data = json.loads(path.read_text())
        if data.get("version") == VERSION and data.get("group") == group:
            return data
    if ids is None:
        ids = calibration_ids(_tokenizer_for(model))
    with Progress(f"chanmix calibration of {path.stem} (first use only, saved to {path})",
                  model.config.get_text_config().num_hidden_layers, "layers") as line:
        data = measure(model, ids, group, progress=line)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
    return data


def decoder_attention(model: Any) -> list:
    """The self-attention modules of the language model's decoder layers, in order. Only the decoder's: a
    vision-language model's vision tower has attention modules of the same name, whose keys never reach the
    cache."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    return [m for name, m in decoder.named_modules() if name.endswith("self_attn") and hasattr(m, "q_proj")]


def measure(model: Any, ids, group: int = 32, progress: Progress | None = None) -> dict:
    """Each decoder layer's channel costs at every level (the module's docstring); `progress` counts layers."""
    import torch
    from transformers import DynamicCache

    from ..quant import weight_of
    from .quant import ChannelCodec, FP8Codec

    text = model.config.get_text_config()
    layers = text.num_hidden_layers
    heads, kv_heads = text.num_attention_heads, text.num_key_value_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    n = (ids.shape[1] // group) * group
    if n < group:
        raise ValueError(f"calibration needs at least {group} tokens, got {ids.shape[1]}")
    ids = ids[:, :n]
    attn = decoder_attention(model)
    if len(attn) != layers:
        raise ValueError(f"chanmix calibration found {len(attn)} attention modules with q_proj in the language "
                         f"model, expected {layers}")
    query_ms: dict[int, torch.Tensor] = {}

    def hook(index):
        def record(_module, _inputs, output):
            q = output.detach().float().reshape(-1, heads, head_dim).pow(2).mean(0)  # [heads, head_dim]
            half = head_dim // 2
            q = torch.cat([(q[:, :half] + q[:, half:]) / 2] * 2, dim=1)  # the RoPE pair's mean
            query_ms[index] = q.reshape(kv_heads, heads // kv_heads, head_dim).mean(1).flatten()
        return record

    handles = [a.q_proj.register_forward_hook(hook(i)) for i, a in enumerate(attn)]
    try:
        cache = DynamicCache(config=model.config)
        with torch.no_grad():
            model(ids, cache=cache, use_cache=True)
    finally:
        for h in handles:
            h.remove()
    out_layers = []
    for i in range(layers):
        keys = cache.layers[i].keys.float()[:1]  # [1, kv_heads, n, head_dim]
        values = cache.layers[i].values.float()[:1]
        key_cost, value_cost = {}, {}
        wo = weight_of(attn[i].o_proj).detach().float()  # [hidden, heads * head_dim]
        w = wo.pow(2).sum(0).reshape(kv_heads, heads // kv_heads, head_dim).sum(1).flatten()
        rms2 = values.pow(2).mean(dim=(0, 2)).flatten()  # [kv_heads * head_dim]
        for b in LEVELS:
            codec = FP8Codec(group) if b == 8 else ChannelCodec(b, group)
            err = (codec.decode(codec.encode(keys), head_dim, torch.float32) - keys).pow(2).mean(dim=(0, 2)).flatten()
            key_cost[str(b)] = (query_ms[i] * err).tolist()
            if b == 8:  # e4m3's relative step near the top of its range: 2^-3
                value_cost[str(b)] = (w * rms2 * (2.0 ** -3) ** 2 / 12).tolist()
            else:
                value_cost[str(b)] = (w * rms2 / ((1 << b) - 1) ** 2).tolist()
        out_layers.append({"keys": key_cost, "values": value_cost, "value_rms": rms2.sqrt().tolist()})
        if progress:
            progress.update()
    return {"version": VERSION, "model": model_id(model), "group": group, "tokens": n, "kv_heads": kv_heads,
            "head_dim": head_dim, "text": "pydoc_data.topics, sorted keys, first 80 %", "layers": out_layers}

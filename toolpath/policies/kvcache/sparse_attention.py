"""Sparse attention over a cache that keeps every key: the registered attention function and the shared parts.

The cache layer stores all keys (and its own page metadata) and returns the full keys from `update()`, so
`get_mask_sizes` and the mask stay true. Selection happens here, in a registered attention function: the
layer hands itself over in `update()` (a thread-local, read once by the very next attention call of the same
module), and for a one-token decode step the function asks that layer which keys and values to attend to
(`layer.sparse_kv(query)`), then computes softmax attention over those only. Everything else (the prefill,
dense layers, a budget that covers the whole sequence, a cache that is not ours) goes to the model's own
attention function unchanged, which is why an infinite budget reproduces DynamicCache exactly.
"""

from __future__ import annotations

import threading
from typing import Any

_HANDOFF = threading.local()
PREFIX = "toolpath_sparse_"


def hand_over(layer: Any) -> None:
    """Called by a layer's update(): the very next attention call of the same module reads this layer."""
    _HANDOFF.layer = layer


def _take() -> Any:
    layer = getattr(_HANDOFF, "layer", None)
    _HANDOFF.layer = None
    return layer


def tensor_bytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def additive_mask(mask, n_keys: int, query_len: int = 1):
    """The model's mask for the last query row as an additive float [B, 1 or H, n_keys] (None if no mask)."""
    import torch

    if mask is None:
        return None
    row = mask[..., -1, :n_keys]
    if row.dtype == torch.bool:
        return torch.zeros(row.shape, dtype=torch.float32, device=row.device).masked_fill(~row, float("-inf"))
    return row.float()


def gather_tokens(store, idx):
    """store [B, Hkv, T, D], idx [B, H, n] (H a multiple of Hkv, -1 = none) -> [B, H, n, D] (padding rows zero)."""
    import torch

    b, h, n = idx.shape
    hkv = store.shape[1]
    head = (torch.arange(h, device=idx.device) // (h // hkv)).view(1, h, 1).expand(b, h, n)
    batch = torch.arange(b, device=idx.device).view(b, 1, 1).expand(b, h, n)
    return store[batch, head, idx.clamp(min=0)]


def gather_bias(mask_row, idx):
    """Additive bias for the gathered tokens: -inf where idx is -1 or the model's mask hides the token.

    mask_row is [B, 1 or H', T] from additive_mask (H' the query heads when the model masks per head).
    """
    import torch

    bias = torch.zeros(idx.shape, dtype=torch.float32, device=idx.device).masked_fill(idx < 0, float("-inf"))
    if mask_row is not None:
        b, h, _ = idx.shape
        rows = mask_row if mask_row.shape[1] == h else mask_row[:, :1].expand(b, h, -1)
        bias = bias + torch.gather(rows.expand(b, h, -1), 2, idx.clamp(min=0))
    return bias


def attend(module, query, keys, values, bias, scaling: float):
    """Softmax attention of one query row over gathered keys: query [B, Hq, 1, D], keys [B, H, n, D].

    H is Hq (each query head gathered its own tokens) or Hkv (a KV head's group reads the same keys); bias is
    [B, H, n], or [B, Hq, n] over Hkv keys when each query head masks its own subset of the group's keys.
    Returns [B, 1, Hq, D] as the attention interface expects.
    """
    import torch

    b, hq, _, d = query.shape
    h = keys.shape[1]
    q = query.view(b, h, hq // h, d).float()
    scores = torch.matmul(q, keys.float().transpose(-1, -2)) * scaling  # [B, H, G, n]
    scores = scores + bias.view(b, h, -1, bias.shape[-1])
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, values.float()).to(query.dtype)  # [B, H, G, D]
    return out.reshape(b, hq, 1, d).transpose(1, 2).contiguous()


def make_attention(base: str):
    """The attention function registered as PREFIX + base: sparse for our layers' decode steps, else `base`."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.llama.modeling_llama import eager_attention_forward

    def base_fn():
        if base == "eager":
            return eager_attention_forward
        return ALL_ATTENTION_FUNCTIONS[base]

    def sparse_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        layer = _take()
        if (layer is None or layer.get_seq_length() != key.shape[-2]
                or not layer.wants_sparse(query.shape[-2])):
            return base_fn()(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        if scaling is None:
            scaling = query.shape[-1] ** -0.5
        keys, values, bias = layer.sparse_kv(query, attention_mask)
        return attend(module, query, keys, values, bias, scaling), None

    sparse_attention.__name__ = PREFIX + base
    return sparse_attention


def install(model) -> str:
    """Register the sparse attention function over the model's current implementation and switch to it."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    current = model.config._attn_implementation or "eager"
    base = current[len(PREFIX):] if current.startswith(PREFIX) else current
    if base not in ("eager", "sdpa"):
        raise ValueError(f"kv_cache: sparse kinds run over eager or sdpa attention, not {base!r}")
    name = PREFIX + base
    AttentionInterface.register(name, make_attention(base))
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[base])
    if current != name:
        for config in _configs(model.config):
            config._attn_implementation = name
    return name


def _configs(config):
    """The config and its sub-configs (a VLM's text config carries its own attention implementation)."""
    out, seen, todo = [], set(), [config]
    while todo:
        c = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        for key in getattr(c, "sub_configs", {}) or {}:
            sub = getattr(c, key, None)
            if sub is not None and hasattr(sub, "_attn_implementation"):
                todo.append(sub)
    return out

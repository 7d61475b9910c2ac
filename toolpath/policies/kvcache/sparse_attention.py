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

import math
import threading
from typing import Any

_HANDOFF = threading.local()
PREFIX = "toolpath_sparse_"


def _hand_over(layer: Any) -> None:
    _HANDOFF.layer = layer


def _take() -> Any:
    layer = getattr(_HANDOFF, "layer", None)
    _HANDOFF.layer = None
    return layer


def sparse_layer_class():
    """SparseLayer is built lazily so that importing this module does not import transformers."""
    global _SPARSE_LAYER
    if _SPARSE_LAYER is None:
        _SPARSE_LAYER = _build_sparse_layer()
    return _SPARSE_LAYER


_SPARSE_LAYER = None


def _build_sparse_layer():
    import torch
    from transformers.cache_utils import DynamicLayer

    class SparseLayer(DynamicLayer):
        """A DynamicLayer that hands itself to the attention function; subclasses pick the keys to attend.

        `dense` layers never select (Quest keeps the first two layers dense). Subclasses implement
        `select_kv(query, mask)` -> (keys, values, bias) with keys [B, H, n, D] for H the query or KV heads
        and bias [B, H, n] additive (0 or -inf), or None to attend densely this step.
        """

        is_croppable = False

        def __init__(self, budget: float, dense: bool = False):
            super().__init__()
            self.budget = budget
            self.dense = dense
            self.sparse_steps = 0  # decode steps that attended a subset
            self.last_query = None

        def update(self, key_states, value_states, *args, **kwargs):
            keys, values = super().update(key_states, value_states, *args, **kwargs)
            self.on_append(key_states.shape[-2])
            _hand_over(self)
            return keys, values

        def on_append(self, n_new: int) -> None:
            """Hook: the last `n_new` rows of self.keys / self.values are new (page bookkeeping)."""

        def wants_sparse(self, query_len: int) -> bool:
            return (not self.dense and query_len == 1 and math.isfinite(self.budget)
                    and self.get_seq_length() > self.budget)

        def sparse_kv(self, query, mask):
            self.sparse_steps += 1
            self.last_query = query  # kept for attention-mass recall figures (one decode row, small)
            return self.select_kv(query, mask)

        def select_kv(self, query, mask):  # pragma: no cover - abstract
            raise NotImplementedError

        def nbytes(self) -> int:
            if not self.is_initialized or self.keys is None:
                return 0
            return tensor_bytes(self.keys, self.values) + self.metadata_nbytes()

        def metadata_nbytes(self) -> int:
            return 0

        def crop(self, tokens_to_remove: int) -> None:
            raise NotImplementedError(f"{type(self).__name__} cannot crop: its page metadata would go stale")

        def batch_repeat_interleave(self, repeats: int) -> None:
            raise NotImplementedError(f"{type(self).__name__} keeps per-row page metadata; beam search is not supported")

        def batch_select_indices(self, indices) -> None:
            raise NotImplementedError(f"{type(self).__name__} keeps per-row page metadata; beam search is not supported")

        def reorder_cache(self, beam_idx) -> None:
            raise NotImplementedError(f"{type(self).__name__} keeps per-row page metadata; beam search is not supported")

    return SparseLayer


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

    H is Hq (each query head chose its own tokens) or Hkv (a KV head's group shares them). Returns
    [B, 1, Hq, D] as the attention interface expects.
    """
    import torch

    b, hq, _, d = query.shape
    h = keys.shape[1]
    q = query.view(b, h, hq // h, d).float()
    scores = torch.matmul(q, keys.float().transpose(-1, -2)) * scaling  # [B, H, G, n]
    scores = scores + bias.unsqueeze(2)
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


def text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def refuse_common(config) -> str | None:
    """Reasons any sparse kind cannot run: sliding-window or non-attention layers, an unknown layer count."""
    text = text_config(config)
    types = getattr(text, "layer_types", None) or []
    if any(t != "full_attention" for t in types):
        other = sorted({t for t in types if t != "full_attention"})
        return f"the model has {', '.join(other)} layers; sparse kinds page only full-attention layers"
    if getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return f"the model uses a sliding window of {text.sliding_window} tokens"
    if not getattr(text, "num_hidden_layers", None):
        return "the model config does not say how many layers it has (num_hidden_layers)"
    return None


def parse_budget(options: dict, field: str = "budget") -> float:
    """`budget` in tokens: a positive integer, or inf / None / 'inf' for no limit (dense)."""
    value = options.get(field)
    if value is None or (isinstance(value, str) and value.strip().lower() in ("inf", "infinity", "none")):
        return math.inf
    if isinstance(value, bool):
        raise ValueError(f"kv_cache.{field}: must be a positive number of tokens or inf, got {value!r}")
    if isinstance(value, float) and math.isinf(value) and value > 0:
        return math.inf
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"kv_cache.{field}: must be a positive number of tokens or inf, got {value!r}") from None
    if number != value and not (isinstance(value, str) and str(number) == value.strip()):
        raise ValueError(f"kv_cache.{field}: must be a whole number of tokens, got {value!r}")
    if number <= 0:
        raise ValueError(f"kv_cache.{field}: must be > 0, got {value!r}")
    return number


def parse_int(options: dict, field: str, default: int, minimum: int) -> int:
    value = options.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"kv_cache.{field}: must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"kv_cache.{field}: must be >= {minimum}, got {value}")
    return value


def reject_unknown(options: dict, known: dict, kind: str) -> None:
    unknown = sorted(set(options) - set(known) - {"kind"})
    if unknown:
        raise ValueError(f"kv_cache.{unknown[0]}: not an option of {kind} (options: {', '.join(sorted(known))})")


def make_cache(layers):
    """A transformers Cache over our layers, with nbytes() and the far-store counters the layers keep."""
    from transformers.cache_utils import Cache

    class SparseCache(Cache):
        def nbytes(self) -> int:
            return sum(layer.nbytes() for layer in self.layers)

        def bytes_moved(self) -> int:
            return sum(getattr(layer, "bytes_moved", 0) for layer in self.layers)

        def decode_steps(self) -> int:
            return max((getattr(layer, "sparse_steps", 0) for layer in self.layers), default=0)

    return SparseCache(layers=layers)

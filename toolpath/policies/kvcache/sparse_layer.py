"""The cache layer every sparse kind extends: it keeps every key (so the model's mask and lengths stay true) and
hands itself to the sparse attention function (sparse_attention.py), which asks it what to attend to."""

from __future__ import annotations

import math

from transformers.cache_utils import DynamicLayer

from .sparse_attention import hand_over, tensor_bytes


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
        hand_over(self)
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

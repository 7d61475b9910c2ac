"""Prefix reuse for the torch backend: the KV state of the tokens a model has already read, kept between calls so the
next prompt that starts the same way (the next step of an episode, or another episode with the same system prompt
and tools) only prefills what is new — vLLM's automatic prefix caching, llama.cpp's prompt cache.

An entry is the token ids one generate() call saw (prompt and answer) and its keys and values per layer. A lookup
finds the entry sharing the longest common prefix with the new prompt and hands back a fresh transformers
DynamicCache holding that many tokens: a copy, so the generation that extends it never touches what is stored. The
entries are bounded by bytes and the least recently used go first; a lock makes lookups and stores safe from
several threads (serve's worker and anything else holding the policy).

Only models whose default cache is a plain DynamicCache take part: a sliding-window or linear-attention layer keeps
less than the whole prefix and cannot be cut back to one; the caller checks with `supports(model)`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

DEFAULT_MB = 256  # model.options.prefix_cache_mb when not given; 0 turns reuse off


@dataclass
class Reuse:
    """What a lookup gives generate(): `cache` (a DynamicCache holding the first `reused` prompt tokens)."""

    cache: Any
    reused: int


def supports(model: Any) -> bool:
    """Whether `model` generates with a plain DynamicCache whose every layer keeps all its tokens (so a stored
    state can be cut to any prefix and extended)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return False
    if getattr(getattr(model, "generation_config", None), "cache_implementation", None):
        return False  # the model asks generate() for a cache of another kind
    default_ok = getattr(model, "_supports_default_dynamic_cache", None)
    if default_ok is None or not default_ok():
        return False
    cache = DynamicCache(config=config.get_text_config(decoder=True))
    return bool(cache.layers) and all(type(layer) is DynamicLayer for layer in cache.layers)


def common_prefix(a: Any, b: Any) -> int:
    """How many leading token ids two 1-D integer tensors share."""
    n = min(a.shape[0], b.shape[0])
    differ = (a[:n] != b[:n]).nonzero()
    return int(differ[0, 0]) if differ.shape[0] else n


class PrefixCache:
    """Stored KV states of earlier calls, at most `max_bytes` of keys and values in all (LRU)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.nbytes = 0
        # entry number -> (token ids, [(keys, values) per layer], bytes), least recently used first
        self._entries: OrderedDict[int, tuple[Any, list[tuple[Any, Any]], int]] = OrderedDict()
        self._next = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, input_ids: Any) -> Reuse:
        """A cache for generating from `input_ids` (1-D): the longest stored prefix of it, copied, leaving at least
        its last token to prefill (generate needs that token's logits). An empty cache when nothing is shared."""
        from transformers.cache_utils import DynamicCache

        best, best_n = None, 0
        with self._lock:
            for key, (ids, _kv, _) in self._entries.items():
                n = min(common_prefix(ids, input_ids), input_ids.shape[0] - 1)
                if n > best_n:
                    best, best_n = key, n
            if best is None:
                return Reuse(DynamicCache(), 0)
            self._entries.move_to_end(best)
            kv = self._entries[best][1]
            # DynamicLayer.update concatenates, so the cache built here owns new tensors: the stored ones stay as
            # they are while generation extends this copy.
            return Reuse(DynamicCache(ddp_cache_data=[(k[..., :best_n, :], v[..., :best_n, :]) for k, v in kv]),
                         best_n)

    def store(self, ids: Any, cache: Any) -> None:
        """Keep the state `cache` holds after generating `ids` (1-D: prompt and answer; the cache covers their first
        `cache.get_seq_length()`). An entry that is a prefix of the new one is dropped: the new one serves its
        prompts too. A state larger than the whole bound is not kept."""
        length = cache.get_seq_length()
        if length == 0:
            return
        kv = [(layer.keys, layer.values) for layer in cache.layers]
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if size > self.max_bytes:
            return
        ids = ids[:length].clone()
        with self._lock:
            for key, (old, _, old_size) in list(self._entries.items()):
                if old.shape[0] <= length and common_prefix(old, ids) == old.shape[0]:
                    del self._entries[key]
                    self.nbytes -= old_size
            while self._entries and self.nbytes + size > self.max_bytes:
                _, (_, _, old_size) = self._entries.popitem(last=False)
                self.nbytes -= old_size
            self._entries[self._next] = (ids, kv, size)
            self._next += 1
            self.nbytes += size

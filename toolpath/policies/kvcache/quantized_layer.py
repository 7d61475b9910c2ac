"""The transformers cache layers the quantized kinds are made of (cache.KVCache holds them).

QuantizedLayer keeps a full-precision residual of recent tokens and a quantized store of blocks of `group`
tokens, each encoded once by its codec (quant.py) and appended. `update()` returns every token: the store
de-quantized, the residual, and the new tokens as given (the current step attends to its own tokens exactly).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from transformers.cache_utils import DynamicLayer

from .quant import nbytes


class FullLayer(DynamicLayer):
    """DynamicLayer, unchanged, that can count its bytes (bits=16)."""

    def nbytes(self) -> int:
        return nbytes([self.keys, self.values]) if self.is_initialized else 0


class QuantizedLayer(DynamicLayer):
    is_croppable = False

    def __init__(self, key_codec: Any, value_codec: Any, group: int, residual: int):
        super().__init__()
        self.key_codec, self.value_codec = key_codec, value_codec
        self.group, self.residual = group, residual
        self.stored = 0  # tokens in the quantized store
        self._kstore: tuple[torch.Tensor, ...] | None = None
        self._vstore: tuple[torch.Tensor, ...] | None = None

    def _decoded(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        if not self.stored:
            return None
        channels, dtype = self.keys.shape[-1], self.keys.dtype
        return (self.key_codec.decode(self._kstore, channels, dtype),
                self.value_codec.decode(self._vstore, self.values.shape[-1], dtype))

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self.keys = key_states[..., :0, :]
            self.values = value_states[..., :0, :]
        decoded = self._decoded()
        self.keys = torch.cat([self.keys, key_states], dim=-2)
        self.values = torch.cat([self.values, value_states], dim=-2)
        if decoded is None:
            keys, values = self.keys, self.values
        else:
            keys = torch.cat([decoded[0], self.keys], dim=-2)
            values = torch.cat([decoded[1], self.values], dim=-2)
        if self.keys.shape[-2] >= self.residual:
            self._flush((self.keys.shape[-2] // self.group) * self.group)
        return keys, values

    def _flush(self, n: int) -> None:
        """Encode the oldest n residual tokens once and append them to the store."""
        kblock = self.key_codec.encode(self.keys[..., :n, :])
        vblock = self.value_codec.encode(self.values[..., :n, :])
        if self._kstore is None:
            self._kstore, self._vstore = kblock, vblock
        else:
            self._kstore = tuple(torch.cat([a, b], dim=2) for a, b in zip(self._kstore, kblock))
            self._vstore = tuple(torch.cat([a, b], dim=2) for a, b in zip(self._vstore, vblock))
        self.keys = self.keys[..., n:, :].clone()  # a view would keep the whole flushed block alive
        self.values = self.values[..., n:, :].clone()
        self.stored += n

    def get_seq_length(self) -> int:
        return self.stored + (self.keys.shape[-2] if self.is_initialized else 0)

    def nbytes(self) -> int:
        if not self.is_initialized:
            return 0
        return nbytes([self.keys, self.values, *(self._kstore or ()), *(self._vstore or ())])

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        if not self.is_initialized:
            return
        self.keys, self.values = fn(self.keys), fn(self.values)
        if self._kstore is not None:
            self._kstore = tuple(fn(t) for t in self._kstore)
            self._vstore = tuple(fn(t) for t in self._vstore)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._map(lambda t: t.index_select(0, beam_idx.to(t.device)))

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._map(lambda t: t.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._map(lambda t: t[indices, ...])

    def crop(self, tokens_to_remove: int) -> None:
        raise ValueError("a quantized KV cache cannot be cropped (its blocks are stored quantized)")

    def reset(self) -> None:
        super().reset()
        self.stored = 0
        self._kstore = self._vstore = None

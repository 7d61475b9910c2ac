"""A quantized cache layer whose first `sinks` tokens stay in full precision (the attention sink).

Most heads of a trained model put a large share of their attention on the sequence's first token whatever it
is (the attention sink). Its errors are therefore read at full weight: a value error on a token reaches the
output times the attention that token gets, and a key error on the sink moves the one logit that holds most of
the mass. Its key is also far from the other tokens' keys, so inside a group of G tokens quantized together it
would stretch every channel's range for the other G - 1.

So the sink tokens are kept apart in full precision, and where they sit in the first quantized block they are
replaced by a copy of the next token (which leaves that block's ranges those of the other tokens); reads put
the exact sink back. The blocks, the residual and the flushes stay exactly where QuantizedLayer has them, so
at any length the layer holds QuantizedLayer's bytes plus the sink's.
"""

from __future__ import annotations

import torch

from .quant import nbytes
from .quantized_layer import QuantizedLayer


class SinkLayer(QuantizedLayer):
    def __init__(self, key_codec, value_codec, group: int, residual: int, sinks: int):
        super().__init__(key_codec, value_codec, group, residual)
        if sinks >= group:
            raise ValueError(f"kv_cache.sinks: fewer sink tokens than the group ({group}), got {sinks}")
        self.sinks = sinks
        self._ksink: torch.Tensor | None = None
        self._vsink: torch.Tensor | None = None

    def _kept(self) -> int:
        return 0 if self._ksink is None else self._ksink.shape[-2]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        take = min(self.sinks - self._kept(), key_states.shape[-2])
        if take > 0:
            ks, vs = key_states[..., :take, :].clone(), value_states[..., :take, :].clone()
            self._ksink = ks if self._ksink is None else torch.cat([self._ksink, ks], dim=-2)
            self._vsink = vs if self._vsink is None else torch.cat([self._vsink, vs], dim=-2)
        keys, values = super().update(key_states, value_states, *args, **kwargs)
        if self._ksink is None:  # sinks=0: a plain quantized layer
            return keys, values
        s = self._kept()
        return torch.cat([self._ksink, keys[..., s:, :]], dim=-2), torch.cat([self._vsink, values[..., s:, :]], dim=-2)

    def _flush(self, n: int) -> None:
        s = self._kept()
        if s and self.stored == 0:  # the first block: the sinks' places hold a copy of the next token
            # out of place: the tensors update() returns for this step may be these very ones
            self.keys = torch.cat([self.keys[..., s:s + 1, :].expand_as(self.keys[..., :s, :]), self.keys[..., s:, :]],
                                  dim=-2)
            self.values = torch.cat([self.values[..., s:s + 1, :].expand_as(self.values[..., :s, :]),
                                     self.values[..., s:, :]], dim=-2)
        super()._flush(n)

    def nbytes(self) -> int:
        return super().nbytes() + nbytes([self._ksink, self._vsink])

    def _map(self, fn) -> None:
        super()._map(fn)
        if self._ksink is not None:
            self._ksink, self._vsink = fn(self._ksink), fn(self._vsink)

    def reset(self) -> None:
        super().reset()
        self._ksink = self._vsink = None

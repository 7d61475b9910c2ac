"""The one transformers Cache every kind returns: a list of our layers that can count what they hold.

`nbytes()` is the bytes of the tensors the layers store (quantized codes and scales, pages and their metadata);
`bytes_moved()` and `decode_steps()` are what a paged kind brought near and how many decode steps attended a
subset (0 for layers that move nothing), so bytes per decode step is their ratio.
"""

from __future__ import annotations

from transformers.cache_utils import Cache


class KVCache(Cache):
    def __init__(self, layers: list):
        super().__init__(layers=layers)

    def nbytes(self) -> int:
        return sum(layer.nbytes() for layer in self.layers)

    def bytes_moved(self) -> int:
        return sum(getattr(layer, "bytes_moved", 0) for layer in self.layers)

    def decode_steps(self) -> int:
        return max((getattr(layer, "sparse_steps", 0) for layer in self.layers), default=0)

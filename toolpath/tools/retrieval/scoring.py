"""Late-interaction scoring of multi-vector embeddings and the per-call budget (nq, nd) that slices them."""

from __future__ import annotations

import re

from ..registry import ToolError

_BUDGET = re.compile(r"^\s*(\d+)\s*[x×]\s*(\d+)\s*$")
_CHUNK_ITEMS = 4096  # items scored per matrix product: bounds the (items, nd, nq) temporary to a few MB


def parse_budget(budget: str, max_q: int, max_d: int, what: str = "retrieve") -> tuple[int, int]:
    """"NQxND" -> (nq, nd), each at least 1 and at most what the model makes (max_q query, max_d document vectors)."""
    m = _BUDGET.match(str(budget))
    if not m:
        raise ToolError(f"{what}: budget must look like NQxND, e.g. 16x64 or 1x1 (query x document vectors), "
                        f"got {budget!r}")
    nq, nd = int(m.group(1)), int(m.group(2))
    if not 1 <= nq <= max_q:
        raise ToolError(f"{what}: budget {budget!r}: the query side has 1 to {max_q} vectors, got {nq}")
    if not 1 <= nd <= max_d:
        raise ToolError(f"{what}: budget {budget!r}: the document side has 1 to {max_d} vectors, got {nd}")
    return nq, nd


def first_vectors(docs):
    """float32 (items, dim): each item's first vector, contiguous. What a one-vector-per-document budget reads,
    kept in the dtype the scorer multiplies in: converting the float16 rows on every query costs several times
    the product itself."""
    import numpy as np

    out = np.empty((len(docs), docs.shape[-1]), dtype=np.float32)
    for start in range(0, len(docs), _CHUNK_ITEMS):
        out[start:start + _CHUNK_ITEMS] = docs[start:start + _CHUNK_ITEMS, 0]
    return out


def late_interaction(query, docs, nq: int | None = None, nd: int | None = None, first=None):
    """Scores (items,) of one query (Q, dim) against documents (items, D, dim): for each of the first nq query
    vectors the best of the first nd document vectors (dot product; the vectors are unit length), summed.

    `docs` may be a memory-mapped float16 array: only the first nd vectors of each item are read, a chunk of
    items at a time, and multiplied in float32. With one document vector (nd = 1) the best of one is that one,
    so the score is one matrix-vector product with the query vectors' sum; `first` (first_vectors(docs), kept by
    the caller) then replaces reading and converting docs."""
    import numpy as np

    q = np.asarray(query, dtype=np.float32)[: nq or len(query)]
    nd = nd or docs.shape[1]
    if nd == 1:
        return (first if first is not None else first_vectors(docs)) @ q.sum(axis=0)
    out = np.empty(len(docs), dtype=np.float32)
    for start in range(0, len(docs), _CHUNK_ITEMS):
        block = np.asarray(docs[start:start + _CHUNK_ITEMS, :nd], dtype=np.float32)  # (n, nd, dim)
        sims = block @ q.T  # (n, nd, nq)
        out[start:start + len(block)] = sims.max(axis=1).sum(axis=1)
    return out

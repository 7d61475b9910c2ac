"""IceCache: semantic clustering with paging (Mao, Wang, Ester, Li, ICLR 2026, "IceCache: Memory-efficient
KV-cache Management for Long-Sequence LLMs").

Per layer and KV head, keys are clustered so that similar keys share a page (icecache_index.py); the pages
live in a far store (a second memory pool in host memory, or `far: mmap`, a memory-mapped file standing in for
host memory when the model runs on a GPU). Near the model stay: `sink` first tokens, a window of `recent`
tokens (a token joins the clustered far store when it leaves the window), and a near pool of pages. At each
decode step a head scores its pages, takes the best ones whose tokens fit the rest of the `budget`
(budget - sink - recent), and brings near only the pages that are not near already; the bytes of those pages
are counted (`cache.bytes_moved()`, per decode step: `bytes_moved() / decode_steps()`). Attention then runs over
sink + recent + the selected pages through the registered attention function. The prefill and the first
`dense_layers` layers attend densely.

Where this differs from the paper (its project page and paper describe the method, not every constant):
- Index: the paper's multi-level DCI (dynamic continuous indexing) tree with randomized projections and
  per-head approximate nearest-neighbour search. Here: a bisecting 2-means hierarchy built once over the prefill
  (leaves = pages; a split that would leave under a quarter on one side, such as one outlier key, becomes a
  median split so the tree stays shallow), then incremental updates (a token joins the nearest leaf
  centroid, a full leaf splits in two). Only the leaves are kept, and the search is exact: a page scores the
  largest q.k among its keys (`score: key`), which is what the paper's nearest-neighbour search for the
  query's top keys approximates. At up to 8k tokens a head has at most ~1k pages, cheaper to score whole on a
  CPU than to maintain projection indices, and an exact search cannot miss a page an ANN search would find.
  `score: bound` ranks pages by Quest's channel max/min bound instead: over clusters its slack grows with a
  cluster's spread, so it prefers loose clusters to the tight ones that hold the query's best keys, and on
  natural text it loses attention mass (docs/results/kvcache.md). `score: centroid` (q . mean key) is the
  cheap routing a hierarchical k-means index would use.
- Keys are clustered in the paper's transformed space [k, sqrt(M^2 - |k|^2)] (M fixed at the prefill).
- Selection (`select: query`, the default) is per query head, as in the paper and Quest: each query head takes
  the best pages for itself within the budget, and the KV head brings near the union of its group's choices
  once, so a page two query heads want moves once. `select: kv` makes one choice per KV head (a page's score
  the best over the group's query heads): fewer bytes moved, but on natural text it loses attention mass
  (docs/results/kvcache.md).
- Page statistics (centroid sums, key max/min) stay in host memory beside the far pages.
- What is kept near always (`sink` 4, `recent` 16) and the dense first two layers are our choices,
  borrowed from StreamingLLM-style sinks and Quest's dense layers.
- A page moves whole (page_size slots) even when its cluster fills it partly; the count says so.
- Only batch rows decode together; beam search and cropping are not supported.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from .kind import Budget, CacheKind, CacheOptions, Whole

# A spec may come from anyone, and far_dir is where the cache writes files as large as the KV cache: only under
# toolpath's own home, never a folder the spec picks elsewhere (~/.ssh, a mounted share, /etc).
FAR_DEFAULT = "kvcache/far"


def far_folder(far_dir: str | None):
    """The far store's folder for a `far_dir` option: under $TOOLPATH_HOME, links resolved; ValueError saying why
    when it is elsewhere."""
    from pathlib import Path

    from toolpath.paths import home as toolpath_home

    home = toolpath_home().resolve()
    try:
        folder = (home / Path(far_dir or FAR_DEFAULT).expanduser()).resolve()
    except (OSError, RuntimeError, ValueError) as err:
        raise ValueError(f"cannot use {far_dir!r}: {err}") from None
    if not folder.is_relative_to(home):
        raise ValueError(f"{far_dir!r} is outside $TOOLPATH_HOME ({home}); the far store's files "
                         f"are written only under it (a relative far_dir is taken there)")
    return folder


class Options(CacheOptions):
    page_size: Whole = Field(16, ge=1, description="tokens per page, the largest a cluster grows before it splits")
    sink: Whole = Field(4, ge=0, description="first tokens always kept near")
    recent: Whole = Field(16, ge=1, description="most recent tokens kept near before they join the clustered far "
                                                "store")
    dense_layers: Whole = Field(2, ge=0, description="the first N layers attend densely")
    select: Literal["query", "kv"] = Field("query", description="who chooses pages: each query head its own within "
                                                               "the budget (query), or one choice per KV head for "
                                                               "its group (kv)")
    score: Literal["key", "bound", "centroid"] = Field("key", description="how a query ranks pages: the best q.k "
                                                                         "among a page's keys (key), Quest's "
                                                                         "channel max/min bound (bound), or q . "
                                                                         "the cluster's mean key (centroid)")
    far: Literal["memory", "mmap"] = Field("memory", description="where far pages live: memory (a second pool in "
                                                                 "host memory) or mmap (a memory-mapped file)")
    far_dir: str | None = Field(None, min_length=1, max_length=4096,
                                description="folder for the mmap far store's files, under $TOOLPATH_HOME (a relative "
                                            "one is taken there; default $TOOLPATH_HOME/kvcache/far)")
    budget: Budget = Field(math.inf, validate_default=True,
                           description="tokens each query head attends per decode step: sink + recent + its "
                                       "selected pages; inf = dense, exactly DynamicCache")

    @field_validator("far_dir")
    @classmethod
    def _under_home(cls, far_dir: str | None) -> str | None:
        if far_dir is not None:
            if not far_dir.strip() or "\x00" in far_dir:
                raise ValueError("must be a folder path")
            far_folder(far_dir)
        return far_dir

    @field_validator("budget")
    @classmethod
    def _room_for_a_page(cls, budget: float, info: ValidationInfo) -> float:
        parts = [info.data.get(k) for k in ("sink", "recent", "page_size")]
        if None not in parts and math.isfinite(budget) and budget < sum(parts):
            raise ValueError(f"must be at least sink + recent + page_size ({sum(parts)}) tokens")
        return budget


def attach(model: Any, options: Options):
    """Switch the model to the sparse attention function and return a fresh IceCache cache for it."""
    from . import sparse_attention as sa
    from .cache import KVCache
    from .icecache_layer import IceLayer
    from .sparse_layer import SparseLayer

    sa.install(model)
    far_dir = str(far_folder(options.far_dir)) if options.far == "mmap" else None
    layers = []
    for i in range(model.config.get_text_config().num_hidden_layers):
        if i < options.dense_layers or not math.isfinite(options.budget):
            layers.append(SparseLayer(options.budget, dense=True))
        else:
            layers.append(IceLayer(options.budget, options.page_size, options.sink, options.recent, far_dir,
                                   per_query=options.select == "query", score=options.score))
    return KVCache(layers)


KIND = CacheKind("icecache", "budget", Options, attach)

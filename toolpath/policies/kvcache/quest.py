"""Quest: query-aware page selection (Tang et al., 2024, "Quest: Query-Aware Sparsity for Efficient
Long-Context LLM Inference").

The cache keeps every key and value. Tokens fall into pages of `page_size` (16) in order; each page keeps the
per-channel max and min of its keys. For a decode query q the page score is the upper bound
sum_d max(q_d * kmax_d, q_d * kmin_d) (= q+ . kmax + q- . kmin), and attention runs over the top pages that fit
the token `budget` (budget // page_size pages). Kept always: the page holding the newest tokens (the current,
possibly partial page), as the reference does by counting it among the selected pages. Each query head picks
its own pages (the reference is per head; with grouped KV heads the group's query heads read the same keys
through different page sets). The first `dense_layers` (2) layers and the prefill attend densely, as in the
reference; the layer count comes from the model config (the reference hard-codes 32 layers).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from .kind import Budget, CacheKind, CacheOptions, Whole


class Options(CacheOptions):
    page_size: Whole = Field(16, ge=1, description="tokens per page (as the reference)")
    dense_layers: Whole = Field(2, ge=0, description="the first N layers attend densely (as the reference)")
    budget: Budget = Field(math.inf, validate_default=True,
                           description="tokens each query head attends per decode step (a multiple of page_size is "
                                       "used: budget // page_size pages); inf = dense, exactly DynamicCache")

    @field_validator("budget")
    @classmethod
    def _a_page_at_least(cls, budget: float, info: ValidationInfo) -> float:
        page = info.data.get("page_size")
        if page is not None and math.isfinite(budget) and budget < page:
            raise ValueError(f"must be at least page_size ({page}) tokens")
        return budget


def attach(model: Any, options: Options):
    """Switch the model to the sparse attention function and return a fresh Quest cache for it."""
    from . import sparse_attention as sa
    from .cache import KVCache
    from .quest_layer import QuestLayer

    sa.install(model)
    layers = model.config.get_text_config().num_hidden_layers
    return KVCache([QuestLayer(options.budget, options.page_size, dense=i < options.dense_layers)
                    for i in range(layers)])


KIND = CacheKind("quest", "budget", Options, attach)

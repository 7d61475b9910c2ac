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

from toolpath.policies.kvcache import sparse_attention as sa

OPTIONS = {
    "budget": "tokens each query head attends per decode step (a multiple of page_size is used: "
              "budget // page_size pages); inf or None = dense, exactly DynamicCache",
    "page_size": "tokens per page (16, as the reference)",
    "dense_layers": "the first N layers attend densely (2, as the reference)",
}


def validate(options: dict) -> dict:
    sa.reject_unknown(options, OPTIONS, "quest")
    page_size = sa.parse_int(options, "page_size", 16, 1)
    budget = sa.parse_budget(options)
    if math.isfinite(budget) and budget < page_size:
        raise ValueError(f"kv_cache.budget: must be at least page_size ({page_size}) tokens, got {budget}")
    return {"budget": budget, "page_size": page_size,
            "dense_layers": sa.parse_int(options, "dense_layers", 2, 0)}


def refuse(config) -> str | None:
    return sa.refuse_common(config)


def attach(model, **options):
    """Switch the model to the sparse attention function and return a fresh Quest cache for it."""
    opts = validate(options)
    reason = refuse(model.config)
    if reason:
        raise ValueError(f"kv_cache: quest cannot run with this model: {reason}")
    sa.install(model)
    layers = sa.text_config(model.config).num_hidden_layers
    cls = quest_layer_class()
    return sa.make_cache([cls(opts["budget"], opts["page_size"], dense=i < opts["dense_layers"])
                          for i in range(layers)])


_QUEST_LAYER = None


def quest_layer_class():
    global _QUEST_LAYER
    if _QUEST_LAYER is None:
        _QUEST_LAYER = _build()
    return _QUEST_LAYER


def page_bounds(keys, page_size: int):
    """Per-page channel max and min of keys [B, H, T, D] -> two [B, H, ceil(T / page_size), D]."""
    import torch

    b, h, t, d = keys.shape
    pages = -(-t // page_size)
    pad = pages * page_size - t
    k = keys.float()
    hi = torch.nn.functional.pad(k, (0, 0, 0, pad), value=float("-inf")).view(b, h, pages, page_size, d)
    lo = torch.nn.functional.pad(k, (0, 0, 0, pad), value=float("inf")).view(b, h, pages, page_size, d)
    return hi.amax(dim=3), lo.amin(dim=3)


def page_scores(query, kmax, kmin):
    """Upper bound of q.k over each page: query [B, Hq, D], bounds [B, Hkv, P, D] -> [B, Hq, P]."""
    b, hq, d = query.shape
    hkv = kmax.shape[1]
    q = query.float().view(b, hkv, hq // hkv, d)
    score = q.clamp(min=0) @ kmax.transpose(-1, -2) + q.clamp(max=0) @ kmin.transpose(-1, -2)
    return score.reshape(b, hq, -1)


def select_pages(scores, n_pages: int):
    """Top pages per head: the last page always, then the best others; [B, H, P] -> [B, H, k] page ids."""
    import torch

    b, h, total = scores.shape
    last = torch.full((b, h, 1), total - 1, dtype=torch.long, device=scores.device)
    others = min(n_pages - 1, total - 1)
    if others <= 0:
        return last
    best = scores[..., : total - 1].topk(others, dim=-1).indices
    return torch.cat([best, last], dim=-1)


def _build():
    import torch

    base = sa.sparse_layer_class()

    class QuestLayer(base):
        def __init__(self, budget: float, page_size: int = 16, dense: bool = False):
            super().__init__(budget, dense)
            self.page_size = page_size
            self.kmax = self.kmin = None
            self.last_selection = None  # token indices [B, Hq, n] of the last sparse step (for recall figures)

        def on_append(self, n_new: int) -> None:
            if self.dense or not math.isfinite(self.budget):
                return
            t = self.keys.shape[-2]
            first = (t - n_new) // self.page_size  # the first page the new tokens touched
            hi, lo = page_bounds(self.keys[:, :, first * self.page_size:], self.page_size)
            if self.kmax is None or first == 0:
                self.kmax, self.kmin = hi, lo
            else:
                self.kmax = torch.cat([self.kmax[:, :, :first], hi], dim=2)
                self.kmin = torch.cat([self.kmin[:, :, :first], lo], dim=2)

        def select_kv(self, query, mask):
            t = self.keys.shape[-2]
            scores = page_scores(query[:, :, -1], self.kmax, self.kmin)
            pages = select_pages(scores, int(self.budget) // self.page_size)
            offsets = torch.arange(self.page_size, device=pages.device)
            idx = (pages.unsqueeze(-1) * self.page_size + offsets).flatten(2)
            idx = idx.masked_fill(idx >= t, -1)
            self.last_selection = idx
            keys = sa.gather_tokens(self.keys, idx)
            values = sa.gather_tokens(self.values, idx)
            return keys, values, sa.gather_bias(sa.additive_mask(mask, t), idx)

        def metadata_nbytes(self) -> int:
            return sa.tensor_bytes(self.kmax, self.kmin)

    return QuestLayer

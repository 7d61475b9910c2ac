"""Quest's cache layer (quest.py says what it does): page bounds kept as keys arrive, the best pages per
query head chosen at each decode step."""

from __future__ import annotations

import math

import torch

from . import sparse_attention as sa
from .sparse_layer import SparseLayer


def page_bounds(keys, page_size: int):
    """Per-page channel max and min of keys [B, H, T, D] -> two [B, H, ceil(T / page_size), D]."""
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
    b, h, total = scores.shape
    last = torch.full((b, h, 1), total - 1, dtype=torch.long, device=scores.device)
    others = min(n_pages - 1, total - 1)
    if others <= 0:
        return last
    best = scores[..., : total - 1].topk(others, dim=-1).indices
    return torch.cat([best, last], dim=-1)


class QuestLayer(SparseLayer):
    """Every key kept, with each page's channel max and min; a decode step attends the best pages per head."""

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

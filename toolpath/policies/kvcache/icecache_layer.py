"""IceCache's cache layer (icecache.py says what it does and where it differs from the paper): sink and recent
tokens near, the rest clustered into far pages (icecache_index.py), the chosen pages brought into a near pool."""

from __future__ import annotations

import torch

from . import sparse_attention as sa
from .icecache_index import ClusterIndex
from .sparse_layer import SparseLayer


class IceLayer(SparseLayer):
    """Sink and recent tokens near, the rest clustered into far pages, selected pages in a near pool."""

    def __init__(self, budget, page_size=16, sink=4, recent=16, far_dir=None, per_query=True, score="key"):
        super().__init__(budget)
        self.page_size, self.sink, self.recent, self.far_dir = page_size, sink, recent, far_dir
        self.per_query = per_query  # each query head chooses its pages (else one choice per KV head)
        self.score = score  # how a page is ranked for a query (ClusterIndex.scores)
        self.length = 0
        self.index = None
        self.bytes_moved = 0
        self.last_selection = None  # positions [B, Hq or Hkv, n] of the last sparse step (-1 = none)

    # storage ---------------------------------------------------------------------------------------------
    def lazy_initialization(self, key_states, value_states):
        b, h, _, d = key_states.shape
        self.device, self.dtype, self.shape = key_states.device, key_states.dtype, (b, h, d)
        empty = key_states[:, :, :0]
        self.keys, self.values = empty, value_states[:, :, :0]  # the sink tokens (near, kept)
        self.tail_k, self.tail_v = empty, value_states[:, :, :0]  # the recent window (near)
        self.tail_pos = torch.zeros(0, dtype=torch.long)
        self.near_k = self.near_v = self.near_page = None  # the near pool, sized at the first sparse step
        self.index = ClusterIndex(b * h, self.page_size, d, self.dtype, self.far_dir)
        self.is_initialized = True

    def cluster_budget(self) -> int:
        return int(self.budget) - self.sink - self.recent

    def get_seq_length(self) -> int:
        return self.length

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        q = key_states.shape[-2]
        start = self.length
        pos = torch.arange(start, start + q)
        room = max(0, self.sink - self.keys.shape[-2])  # the first tokens fill the sink
        if room:
            self.keys = torch.cat([self.keys, key_states[:, :, :room]], dim=-2)
            self.values = torch.cat([self.values, value_states[:, :, :room]], dim=-2)
        self.tail_k = torch.cat([self.tail_k, key_states[:, :, room:]], dim=-2)
        self.tail_v = torch.cat([self.tail_v, value_states[:, :, room:]], dim=-2)
        self.tail_pos = torch.cat([self.tail_pos, pos[room:]])
        self.length += q
        self._spill(prefill=start == 0)
        _hand = self.wants_sparse(q)
        sa.hand_over(self)
        if _hand:
            # the attention function reads the near store; these zero-copy views only carry the length
            return key_states[:, :, -1:].expand(-1, -1, self.length, -1), \
                value_states[:, :, -1:].expand(-1, -1, self.length, -1)
        if start == 0:
            return key_states, value_states
        return self.materialize(count=True)

    def _spill(self, prefill: bool) -> None:
        """Tokens beyond the recent window leave for the far store (clustered in bulk at the prefill)."""
        extra = self.tail_k.shape[-2] - self.recent
        if extra <= 0:
            return
        b, h, d = self.shape
        old_k, old_v = self.tail_k[:, :, :extra], self.tail_v[:, :, :extra]
        old_pos = self.tail_pos[:extra]
        if prefill and len(self.index) == 0:
            self.index.build(old_k.reshape(b * h, extra, d), old_v.reshape(b * h, extra, d), old_pos)
        else:
            for i in range(extra):
                self.index.insert(old_k[:, :, i].reshape(b * h, d), old_v[:, :, i].reshape(b * h, d),
                                  int(old_pos[i]))
        self.tail_k, self.tail_v = self.tail_k[:, :, extra:], self.tail_v[:, :, extra:]
        self.tail_pos = self.tail_pos[extra:]

    def materialize(self, count: bool = False):
        """Every token's key and value in position order [B, H, T, D] (a dense step reads them all)."""
        b, h, d = self.shape
        keys = torch.zeros(b * h, self.length, d, dtype=self.dtype, device=self.device)
        values = torch.zeros_like(keys)
        n_sink = self.keys.shape[-2]
        keys[:, :n_sink] = self.keys.reshape(b * h, n_sink, d)
        values[:, :n_sink] = self.values.reshape(b * h, n_sink, d)
        keys[:, self.tail_pos] = self.tail_k.reshape(b * h, -1, d)
        values[:, self.tail_pos] = self.tail_v.reshape(b * h, -1, d)
        idx = self.index
        valid = idx.pos >= 0
        if valid.any():
            g = torch.arange(b * h).view(-1, 1, 1).expand_as(idx.pos)[valid]
            p = idx.pos[valid]
            keys[g.to(self.device), p.to(self.device)] = idx.far.keys[:, : idx.pos.shape[1]][valid].to(self.device)
            values[g.to(self.device), p.to(self.device)] = \
                idx.far.values[:, : idx.pos.shape[1]][valid].to(self.device)
            if count:
                self.bytes_moved += 2 * int(valid.sum()) * d * keys.element_size()
        return keys.view(b, h, self.length, d), values.view(b, h, self.length, d)

    # selection -------------------------------------------------------------------------------------------
    def select_kv(self, query, mask):
        b, h, d = self.shape
        group = query.shape[1] // h
        pages = self._choose(query[:, :, -1].reshape(b * h, group, d))  # [G, choosers, k]
        self._bring_near(pages)
        choosers = pages.shape[1]
        # which near slots each chooser picked: [G, choosers, slots]
        selected = (self.near_page[:, None, :, None] == pages[:, :, None, :]).any(-1) \
            & (self.near_page >= 0).unsqueeze(1)
        slot_pos = self._near_pos().unsqueeze(1)  # [G, 1, slots, page_size]
        near_pos = torch.where(selected.unsqueeze(-1), slot_pos, torch.full_like(slot_pos, -1)).flatten(2)
        n_sink = self.keys.shape[-2]
        always = torch.cat([torch.arange(n_sink), self.tail_pos]).expand(b * h, choosers, -1)
        pos = torch.cat([always, near_pos], dim=2).view(b, h * choosers, -1).to(self.device)
        self.last_selection = pos
        keys = torch.cat([self.keys, self.tail_k, self.near_k.view(b, h, -1, d)], dim=-2)
        values = torch.cat([self.values, self.tail_v, self.near_v.view(b, h, -1, d)], dim=-2)
        bias = sa.gather_bias(sa.additive_mask(mask, self.length), pos)  # per chooser over the KV head's keys
        return keys, values, bias

    def _near_pos(self):
        idx = self.index
        g = torch.arange(self.near_page.shape[0]).unsqueeze(1)
        return torch.where((self.near_page >= 0).unsqueeze(-1), idx.pos[g, self.near_page.clamp(min=0)],
                           torch.full((*self.near_page.shape, self.page_size), -1, dtype=torch.long))

    def _near_pool(self, choosers: int) -> None:
        """Slots for twice the pages a full-page selection needs (split pages are often half full), for each
        query head that chooses: the group's choices overlap, but the pool must hold them when they do not."""
        b, h, d = self.shape
        slots = choosers * max(1, -(-2 * self.cluster_budget() // self.page_size))
        self.near_k = torch.zeros(b * h, slots, self.page_size, d, dtype=self.dtype, device=self.device)
        self.near_v = torch.zeros_like(self.near_k)
        self.near_page = torch.full((b * h, slots), -1, dtype=torch.long)
        self.near_version = torch.zeros((b * h, slots), dtype=torch.long)

    def _choose(self, query):
        """Best pages per chooser (each query head of query [G, Hg, D], or the group as one) whose tokens fit
        the cluster budget: [G, choosers, k], -1 pads."""
        scores = self.index.scores(query, per_head=self.per_query, rule=self.score)  # [G, choosers, capacity]
        if self.near_page is None:
            self._near_pool(scores.shape[1])
        k = min(self.near_page.shape[1] // scores.shape[1], scores.shape[2])
        top = scores.topk(k, dim=2)
        counts = self.index.count.unsqueeze(1).expand(-1, scores.shape[1], -1).gather(2, top.indices)
        fits = (torch.cumsum(counts, 2) <= self.cluster_budget()) & torch.isfinite(top.values)
        return torch.where(fits, top.indices, torch.full_like(top.indices, -1))

    def _bring_near(self, pages) -> None:
        """Copy the chosen pages [G, choosers, k] that are not near (or changed since they came) into free near
        slots; a page several query heads chose moves once."""
        far, nbytes = self.index.far, 2 * self.page_size * self.shape[2] * self.near_k.element_size()
        version = self.index.version
        for g in range(pages.shape[0]):
            want = sorted({p for p in pages[g].flatten().tolist() if p >= 0})
            here = self.near_page[g].tolist()
            fresh = {p for p, v in zip(here, self.near_version[g].tolist())
                     if p >= 0 and v == int(version[g, p])}
            missing = [p for p in want if p not in fresh]
            if not missing:
                continue
            keep = set(want) & fresh
            free = [s for s, p in enumerate(here) if p not in keep]
            slots = torch.tensor(free[: len(missing)])
            rows = torch.tensor(missing)
            self.near_k[g, slots] = far.keys[g, rows].to(self.device, non_blocking=True)
            self.near_v[g, slots] = far.values[g, rows].to(self.device, non_blocking=True)
            self.near_page[g, slots] = rows
            self.near_version[g, slots] = version[g, rows]
            self.bytes_moved += len(missing) * nbytes

    # accounting ------------------------------------------------------------------------------------------
    def near_nbytes(self) -> int:
        if self.index is None:
            return 0
        return sa.tensor_bytes(self.keys, self.values, self.tail_k, self.tail_v, self.near_k, self.near_v)

    def far_nbytes(self) -> int:
        return 0 if self.index is None else self.index.far.nbytes()

    def nbytes(self) -> int:
        if self.index is None:
            return 0
        return self.near_nbytes() + self.far_nbytes() + self.index.metadata_nbytes()

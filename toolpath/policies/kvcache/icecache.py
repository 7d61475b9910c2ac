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
  centroid, a full leaf splits in two), and the search scores every leaf exactly with a channel-wise max/min bound on the page's keys
  instead of walking DCI's projections: at up to 8k tokens a head has at most ~1k leaves, cheaper to score
  all on a CPU than to maintain projection indices, and an exact bound cannot miss a page an ANN search would.
- Keys are clustered in the paper's transformed space [k, sqrt(M^2 - |k|^2)] (M fixed at the prefill).
- Selection is per KV head (a group of query heads shares its pages; a page's score is the best over the
  group's query heads), so the bytes moved are the KV head's pages once, not once per query head.
- Page statistics (centroid sums, key max/min) stay in host memory beside the far pages.
- What is kept near always (`sink` 4, `recent` 16) and the dense first two layers are our choices,
  borrowed from StreamingLLM-style sinks and Quest's dense layers.
- A page moves whole (page_size slots) even when its cluster fills it partly; the count says so.
- Only batch rows decode together; beam search and cropping are not supported.
"""

from __future__ import annotations

import math

from toolpath.policies.kvcache import sparse_attention as sa

OPTIONS = {
    "budget": "tokens each KV head attends per decode step: sink + recent + selected pages' tokens; "
              "inf or None = dense, exactly DynamicCache",
    "page_size": "tokens per page, the largest a cluster grows before it splits (16)",
    "sink": "first tokens always kept near (4)",
    "recent": "most recent tokens kept near before they join the clustered far store (16)",
    "dense_layers": "the first N layers attend densely (2)",
    "far": "where far pages live: 'memory' (a second pool in host memory) or 'mmap' (a memory-mapped file)",
    "far_dir": "folder for the 'mmap' far store's files, under $TOOLPATH_HOME (a relative one is taken there; "
               "default $TOOLPATH_HOME/kvcache/far)",
}
# A spec may come from anyone, and far_dir is where the cache writes files as large as the KV cache: only under
# toolpath's own home, never a folder the spec picks elsewhere (~/.ssh, a mounted share, /etc).
FAR_DEFAULT = "kvcache/far"


def far_folder(far_dir: str | None):
    """The far store's folder for a `far_dir` option: under $TOOLPATH_HOME, links resolved; ValueError naming the
    option when it is elsewhere."""
    from pathlib import Path

    from toolpath.paths import home as toolpath_home

    home = toolpath_home().resolve()
    try:
        folder = (home / Path(far_dir or FAR_DEFAULT).expanduser()).resolve()
    except (OSError, RuntimeError, ValueError) as err:
        raise ValueError(f"kv_cache.far_dir: cannot use {far_dir!r}: {err}") from None
    if not folder.is_relative_to(home):
        raise ValueError(f"kv_cache.far_dir: {far_dir!r} is outside $TOOLPATH_HOME ({home}); the far store's files "
                         f"are written only under it (a relative far_dir is taken there)")
    return folder


def validate(options: dict) -> dict:
    sa.reject_unknown(options, OPTIONS, "icecache")
    out = {
        "budget": sa.parse_budget(options),
        "page_size": sa.parse_int(options, "page_size", 16, 1),
        "sink": sa.parse_int(options, "sink", 4, 0),
        "recent": sa.parse_int(options, "recent", 16, 1),
        "dense_layers": sa.parse_int(options, "dense_layers", 2, 0),
        "far": options.get("far", "memory"),
        "far_dir": options.get("far_dir"),
    }
    if out["far"] not in ("memory", "mmap"):
        raise ValueError(f"kv_cache.far: must be 'memory' or 'mmap', got {out['far']!r}")
    if out["far_dir"] is not None and (not isinstance(out["far_dir"], str) or not out["far_dir"].strip()
                                       or "\x00" in out["far_dir"] or len(out["far_dir"]) > 4096):
        raise ValueError(f"kv_cache.far_dir: must be a folder path, got {out['far_dir']!r}")
    if out["far_dir"] is not None:
        far_folder(out["far_dir"])
    floor = out["sink"] + out["recent"] + out["page_size"]
    if math.isfinite(out["budget"]) and out["budget"] < floor:
        raise ValueError(f"kv_cache.budget: must be at least sink + recent + page_size ({floor}) tokens, "
                         f"got {out['budget']}")
    return out


def refuse(config) -> str | None:
    return sa.refuse_common(config)


def attach(model, **options):
    """Switch the model to the sparse attention function and return a fresh IceCache cache for it."""
    opts = validate(options)
    reason = refuse(model.config)
    if reason:
        raise ValueError(f"kv_cache: icecache cannot run with this model: {reason}")
    sa.install(model)
    layers = sa.text_config(model.config).num_hidden_layers
    far_dir = str(far_folder(opts["far_dir"])) if opts["far"] == "mmap" else None
    dense_cls, ice_cls = sa.sparse_layer_class(), ice_layer_class()
    out = []
    for i in range(layers):
        if i < opts["dense_layers"] or not math.isfinite(opts["budget"]):
            out.append(dense_cls(opts["budget"], dense=True))
        else:
            out.append(ice_cls(opts["budget"], opts["page_size"], opts["sink"], opts["recent"], far_dir))
    return sa.make_cache(out)


_ICE_LAYER = None


def ice_layer_class():
    global _ICE_LAYER
    if _ICE_LAYER is None:
        _ICE_LAYER = _build()
    return _ICE_LAYER


def _build():
    import torch

    from toolpath.policies.kvcache.icecache_index import ClusterIndex

    base = sa.sparse_layer_class()

    class IceLayer(base):
        """Sink and recent tokens near, the rest clustered into far pages, selected pages in a near pool."""

        def __init__(self, budget, page_size=16, sink=4, recent=16, far_dir=None):
            super().__init__(budget)
            self.page_size, self.sink, self.recent, self.far_dir = page_size, sink, recent, far_dir
            self.length = 0
            self.index = None
            self.bytes_moved = 0
            self.last_selection = None  # positions [B, Hkv, n] of the last sparse step (-1 = none)

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
            sa._hand_over(self)
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
            hq = query.shape[1]
            pages = self._choose(query[:, :, -1].reshape(b * h, hq // h, d))
            self._bring_near(pages)
            selected = (self.near_page.unsqueeze(-1) == pages.unsqueeze(1)).any(-1) & (self.near_page >= 0)
            near_pos = torch.where(selected.unsqueeze(-1), self._near_pos(), torch.full_like(self._near_pos(), -1))
            n_sink = self.keys.shape[-2]
            pos = torch.cat([torch.arange(n_sink).expand(b * h, -1), self.tail_pos.expand(b * h, -1),
                             near_pos.flatten(1)], dim=1).view(b, h, -1).to(self.device)
            self.last_selection = pos
            keys = torch.cat([self.keys, self.tail_k, self.near_k.view(b, h, -1, d)], dim=-2)
            values = torch.cat([self.values, self.tail_v, self.near_v.view(b, h, -1, d)], dim=-2)
            bias = sa.gather_bias(sa.additive_mask(mask, self.length), pos)
            return keys, values, bias

        def _near_pos(self):
            idx = self.index
            g = torch.arange(self.near_page.shape[0]).unsqueeze(1)
            return torch.where((self.near_page >= 0).unsqueeze(-1), idx.pos[g, self.near_page.clamp(min=0)],
                               torch.full((*self.near_page.shape, self.page_size), -1, dtype=torch.long))

        def _near_pool(self) -> None:
            """Slots for twice the pages a full-page selection needs: split pages are often half full."""
            b, h, d = self.shape
            slots = max(1, -(-2 * self.cluster_budget() // self.page_size))
            self.near_k = torch.zeros(b * h, slots, self.page_size, d, dtype=self.dtype, device=self.device)
            self.near_v = torch.zeros_like(self.near_k)
            self.near_page = torch.full((b * h, slots), -1, dtype=torch.long)
            self.near_version = torch.zeros((b * h, slots), dtype=torch.long)

        def _choose(self, query):
            """Best pages per group whose tokens fit the cluster budget and the near pool: [G, slots], -1 pads."""
            if self.near_page is None:
                self._near_pool()
            scores = self.index.scores(query)
            slots = self.near_page.shape[1]
            k = min(slots, scores.shape[1])
            top = scores.topk(k, dim=1)
            counts = self.index.count.gather(1, top.indices)
            fits = (torch.cumsum(counts, 1) <= self.cluster_budget()) & torch.isfinite(top.values)
            return torch.where(fits, top.indices, torch.full_like(top.indices, -1))

        def _bring_near(self, pages) -> None:
            """Copy the chosen pages that are not near (or changed since they came) into free near slots."""
            far, nbytes = self.index.far, 2 * self.page_size * self.shape[2] * self.near_k.element_size()
            version = self.index.version
            for g in range(pages.shape[0]):
                want = [p for p in pages[g].tolist() if p >= 0]
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

    return IceLayer

"""IceCache's clustered page store: one cluster per page, pages in a far pool, bounded by splitting.

One index serves one layer and holds G = batch x KV-heads independent groups (each head clusters its own
keys). Keys are clustered in the transformed space x' = [k, sqrt(M^2 - |k|^2)] (the inner-product-to-distance
transform the IceCache paper applies before indexing; M is the largest key norm seen at build time, and a
later key longer than M gets 0 for the extra coordinate). Clusters are built top-down by bisection (2-means
seeded with the farthest pair, split again while larger than a page), so every leaf cluster fits one page;
a new token joins the cluster with the nearest centroid, and a full cluster splits in two pages by the same
2-means. A query scores a page by the largest q.k among its keys (`scores`); the channel-wise max/min bound
and the centroid are kept as ablations.
"""

from __future__ import annotations

import os
import tempfile

LLOYD_STEPS = 3


def transform(keys, norm_max):
    """[..., D] keys -> [..., D + 1] in float32, so Euclidean nearness follows the inner product ranking."""
    import torch

    k = keys.float()
    sq = (norm_max ** 2 - (k * k).sum(-1)).clamp(min=0)
    return torch.cat([k, sq.sqrt().unsqueeze(-1)], dim=-1)


def _seg_argmax(values, seg, n):
    """Index (into values) of the largest value in each of n segments."""
    import torch

    top = torch.full((n,), float("-inf"), device=values.device).scatter_reduce(0, seg, values, "amax")
    hit = values >= top[seg]
    idx = torch.arange(values.numel(), device=values.device)
    big = torch.full((n,), values.numel(), dtype=torch.long, device=values.device)
    return big.scatter_reduce(0, seg[hit], idx[hit], "amin")


def bisect(points, seg, n):
    """Split each of n segments of points [N, D'] in two by 2-means; returns side [N] bool (True = second).

    Seeds are the point farthest from the segment mean and the point farthest from that one.
    """
    import torch

    sizes = torch.bincount(seg, minlength=n).clamp(min=1).float()
    mean = torch.zeros(n, points.shape[1], device=points.device).index_add_(0, seg, points) / sizes[:, None]
    a = points[_seg_argmax(((points - mean[seg]) ** 2).sum(1), seg, n)]
    b = points[_seg_argmax(((points - a[seg]) ** 2).sum(1), seg, n)]
    for _ in range(LLOYD_STEPS):
        side = ((points - a[seg]) ** 2).sum(1) > ((points - b[seg]) ** 2).sum(1)
        count_b = torch.bincount(seg[side], minlength=n).float()
        count_a = torch.bincount(seg[~side], minlength=n).float()
        sum_b = torch.zeros_like(mean).index_add_(0, seg[side], points[side])
        sum_a = torch.zeros_like(mean).index_add_(0, seg[~side], points[~side])
        a = torch.where(count_a[:, None] > 0, sum_a / count_a.clamp(min=1)[:, None], a)
        b = torch.where(count_b[:, None] > 0, sum_b / count_b.clamp(min=1)[:, None], b)
    side = ((points - a[seg]) ** 2).sum(1) > ((points - b[seg]) ** 2).sum(1)
    size = torch.bincount(seg, minlength=n)
    count_b = torch.bincount(seg[side], minlength=n)
    # a split that leaves less than a quarter on one side (an outlier key peeled off, or identical keys)
    # becomes a median split along the seeds' axis, so the hierarchy stays about log2(N / page) deep
    lopsided = 4 * torch.minimum(count_b, size - count_b) < size
    if lopsided.any():
        proj = ((points - a[seg]) * (b - a)[seg]).sum(1)
        order = torch.argsort(proj, stable=True)
        order = order[torch.argsort(seg[order], stable=True)]
        rank = torch.empty_like(order)
        rank[order] = torch.arange(seg.numel(), device=seg.device)
        first = torch.cumsum(size, 0) - size
        median = (rank - first[seg]) * 2 >= size[seg]
        side = torch.where(lopsided[seg], median, side)
    return side


def cluster(points, groups, n_groups: int, limit: int):
    """Bisect every group's points until each cluster holds at most `limit`; returns (page [N], pages [G]).

    page is the cluster's index within its group (0..pages[g]-1), so a cluster maps to one page.
    """
    import torch

    cid = groups.clone()
    n = n_groups
    while True:
        sizes = torch.bincount(cid, minlength=n)
        big = sizes > limit
        if not big.any():
            break
        member = big[cid]
        parts, local = torch.unique(cid[member], return_inverse=True)
        side = bisect(points[member], local, parts.numel())
        cid = cid.clone()
        cid[member] = n + 2 * local + side.long()
        n = n + 2 * parts.numel()
    # renumber clusters group-major so that each group's pages are 0..k-1
    key = groups * n + cid
    uniq, leaf = torch.unique(key, return_inverse=True)
    leaf_group = uniq // n
    pages = torch.bincount(leaf_group, minlength=n_groups)
    first = torch.cumsum(pages, 0) - pages
    return leaf - first[leaf_group[leaf]], pages


class FarStore:
    """Pages of keys and values [G, capacity, page_size, D] in a second memory pool (host memory, or a
    memory-mapped file when `path_dir` is given), grown by doubling."""

    def __init__(self, groups: int, page_size: int, dim: int, dtype, path_dir: str | None = None):
        self.groups, self.page_size, self.dim, self.dtype = groups, page_size, dim, dtype
        self.path_dir = path_dir
        self.capacity = 0
        self.keys = self.values = None
        self._files: list[str] = []

    def _alloc(self, capacity: int):
        import torch

        shape = (self.groups, capacity, self.page_size, self.dim)
        if self.path_dir is None:
            return torch.zeros(shape, dtype=self.dtype)
        os.makedirs(self.path_dir, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="icecache-", suffix=".pages", dir=self.path_dir)
        os.close(fd)
        self._files.append(path)
        numel = 1
        for s in shape:
            numel *= s
        return torch.from_file(path, shared=True, size=numel, dtype=self.dtype).view(shape)

    def ensure(self, capacity: int) -> None:
        if capacity <= self.capacity:
            return
        new = max(capacity, 2 * self.capacity, 8)
        keys, values = self._alloc(new), self._alloc(new)
        if self.capacity:
            keys[:, : self.capacity] = self.keys
            values[:, : self.capacity] = self.values
        old = self._files[:-2] if self.path_dir else []
        self.keys, self.values, self.capacity = keys, values, new
        for path in old:
            os.unlink(path)
        self._files = self._files[-2:] if self.path_dir else []

    def nbytes(self) -> int:
        if self.keys is None:
            return 0
        return 2 * self.keys.numel() * self.keys.element_size()

    def close(self) -> None:
        for path in self._files:
            if os.path.exists(path):
                os.unlink(path)
        self._files = []

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class ClusterIndex:
    """The clustered pages of one layer: far pages plus per-page statistics kept near for scoring."""

    def __init__(self, groups: int, page_size: int, dim: int, dtype, far_dir: str | None = None):
        import torch

        self.groups, self.page_size, self.dim = groups, page_size, dim
        self.far = FarStore(groups, page_size, dim, dtype, far_dir)
        self.pages = torch.zeros(groups, dtype=torch.long)
        self.norm_max = torch.zeros(groups)
        self.pos = self.count = self.version = self.csum = self.kmax = self.kmin = None
        self.bytes_written = 0
        self._grow(8)

    def _grow(self, capacity: int) -> None:
        import torch

        old = 0 if self.count is None else self.count.shape[1]
        self.far.ensure(capacity)
        cap = self.far.capacity
        if cap == old:
            return
        g, p, d = self.groups, self.page_size, self.dim

        def pad(t, fill, shape, dtype):
            new = torch.full(shape, fill, dtype=dtype)
            if t is not None:
                new[:, :old] = t
            return new

        self.pos = pad(self.pos, -1, (g, cap, p), torch.long)
        self.count = pad(self.count, 0, (g, cap), torch.long)
        self.version = pad(self.version, 0, (g, cap), torch.long)  # bumped on every write: near copies go stale
        self.csum = pad(self.csum, 0.0, (g, cap, d + 1), torch.float32)
        self.kmax = pad(self.kmax, float("-inf"), (g, cap, d), torch.float32)
        self.kmin = pad(self.kmin, float("inf"), (g, cap, d), torch.float32)

    def __len__(self) -> int:
        return int(self.count.sum())

    def build(self, keys, values, positions) -> None:
        """Cluster a block of tokens into fresh pages: keys/values [G, N, D] (on any device), positions [N]."""
        import torch

        g, n, d = keys.shape
        keys, values = keys.detach().cpu(), values.detach().cpu()
        self.norm_max = keys.float().norm(dim=-1).amax(dim=1)
        points = transform(keys, self.norm_max.unsqueeze(1)).reshape(g * n, d + 1)
        groups = torch.arange(g).repeat_interleave(n)
        page, pages = cluster(points, groups, g, self.page_size)
        self._grow(int(pages.max()))
        order = torch.argsort(groups * (int(pages.max()) + 1) + page, stable=True)
        slot = torch.empty_like(order)
        sorted_key = (groups * (int(pages.max()) + 1) + page)[order]
        starts = torch.ones_like(sorted_key, dtype=torch.bool)
        starts[1:] = sorted_key[1:] != sorted_key[:-1]
        run_start = torch.cummax(torch.where(starts, torch.arange(g * n), torch.zeros_like(order)), 0).values
        slot[order] = torch.arange(g * n) - run_start
        flat_k, flat_v = keys.reshape(g * n, d), values.reshape(g * n, d)
        self.far.keys[groups, page, slot] = flat_k.to(self.far.dtype)
        self.far.values[groups, page, slot] = flat_v.to(self.far.dtype)
        self.pos[groups, page, slot] = positions.repeat(g)
        self.count.index_put_((groups, page), torch.ones(g * n, dtype=torch.long), accumulate=True)
        self.csum.index_put_((groups, page), points, accumulate=True)
        kf = flat_k.float()
        lin = groups * self.kmax.shape[1] + page
        rows = lin.unsqueeze(1).expand(-1, d)
        self.kmax.view(-1, d).scatter_reduce_(0, rows, kf, "amax")
        self.kmin.view(-1, d).scatter_reduce_(0, rows, kf, "amin")
        self.pages = pages
        self.bytes_written += 2 * keys.numel() * self.far.keys.element_size()

    def insert(self, keys, values, position: int) -> None:
        """Add one token to every group: keys/values [G, D]. Joins the nearest cluster; a full one splits."""
        import torch

        keys, values = keys.detach().cpu(), values.detach().cpu()
        g = torch.arange(self.groups)
        point = transform(keys, self.norm_max)
        used = self.count > 0
        centre = self.csum / self.count.clamp(min=1).unsqueeze(-1)
        dist = ((centre - point.unsqueeze(1)) ** 2).sum(-1).masked_fill(~used, float("inf"))
        page = dist.argmin(dim=1)
        empty = ~used.any(dim=1)
        if empty.any():  # a group with no page yet starts one
            self._grow(int(self.pages.max()) + 1)
            page = torch.where(empty, self.pages, page)
            self.pages = self.pages + empty.long()
        fill = self.count[g, page]
        room = fill < self.page_size
        if room.any():
            r, p, s = g[room], page[room], fill[room]
            self._write(r, p, s, keys[room], values[room], point[room], position)
        for gi in g[~room].tolist():
            self._split(gi, int(page[gi]), keys[gi], values[gi], position)

    def _write(self, groups, pages, slots, keys, values, points, position: int) -> None:
        self.far.keys[groups, pages, slots] = keys.to(self.far.dtype)
        self.far.values[groups, pages, slots] = values.to(self.far.dtype)
        self.pos[groups, pages, slots] = position
        self.count[groups, pages] += 1
        self.version[groups, pages] += 1
        self.csum[groups, pages] += points
        kf = keys.float()
        self.kmax[groups, pages] = self.kmax[groups, pages].maximum(kf)
        self.kmin[groups, pages] = self.kmin[groups, pages].minimum(kf)
        self.bytes_written += 2 * keys.numel() * self.far.keys.element_size()

    def _split(self, g: int, page: int, key, value, position: int) -> None:
        """A full page plus one token -> two pages (the old one rewritten, one new), by 2-means."""
        import torch

        keys = torch.cat([self.far.keys[g, page].float(), key.float().unsqueeze(0)])
        values = torch.cat([self.far.values[g, page].float(), value.float().unsqueeze(0)])
        pos = torch.cat([self.pos[g, page], torch.tensor([position])])
        points = transform(keys, self.norm_max[g])
        side = bisect(points, torch.zeros(len(keys), dtype=torch.long), 1)
        new = int(self.pages[g])
        self._grow(new + 1)
        self.pages[g] = new + 1
        for target, members in ((page, ~side), (new, side)):
            m = int(members.sum())
            self.far.keys[g, target].zero_()
            self.far.values[g, target].zero_()
            self.pos[g, target] = -1
            self.far.keys[g, target, :m] = keys[members].to(self.far.dtype)
            self.far.values[g, target, :m] = values[members].to(self.far.dtype)
            self.pos[g, target, :m] = pos[members]
            self.count[g, target] = m
            self.version[g, target] += 1
            self.csum[g, target] = points[members].sum(0)
            self.kmax[g, target] = keys[members].amax(0)
            self.kmin[g, target] = keys[members].amin(0)
        self.bytes_written += 2 * keys.numel() * self.far.keys.element_size()

    def scores(self, query, per_head: bool = True, rule: str = "key"):
        """Page scores for each group's query heads: query [G, Hg, D] -> [G, Hg, capacity], or the best over the
        group's heads [G, 1, capacity] when not per_head. Empty pages score -inf.

        rule "key": a page scores the largest q.k among its keys, what a nearest-neighbour search for the query's
        top keys finds (the search reads keys in the far pool, where the index lives; nothing moves near).
        rule "bound": the channel-wise upper bound sum_d max(q_d kmax_d, q_d kmin_d) Quest uses for pages of
        neighbouring tokens; over clusters its slack grows with a cluster's spread, so it favours loose clusters
        over the tight ones that hold the query's best keys. rule "centroid": q . the cluster's mean key.
        """
        import torch

        q = query.detach().float().cpu()
        cap = self.count.shape[1]
        if rule == "key":
            keys = self.far.keys[:, :cap].float()  # [G, cap, page_size, D]
            score = torch.einsum("ghd,gcpd->ghcp", q, keys)
            score = score.masked_fill((self.pos < 0).unsqueeze(1), float("-inf")).amax(-1)
        elif rule == "bound":
            score = q.clamp(min=0) @ self.kmax.nan_to_num(neginf=0.0).transpose(1, 2) \
                + q.clamp(max=0) @ self.kmin.nan_to_num(posinf=0.0).transpose(1, 2)
        elif rule == "centroid":
            centre = self.csum[..., : self.dim] / self.count.clamp(min=1).unsqueeze(-1)
            score = q @ centre.transpose(1, 2)
        else:
            raise ValueError(f"unknown page score rule {rule!r} (key, bound, centroid)")
        if not per_head:
            score = score.amax(dim=1, keepdim=True)
        return score.masked_fill((self.count == 0).unsqueeze(1), float("-inf"))

    def metadata_nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.pos, self.count, self.csum, self.kmax, self.kmin))

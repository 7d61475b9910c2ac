"""Where icecache's page choice keeps or loses full attention's mass, against quest's, on one text window.

    python benchmarks/icecache_pages.py [--model local] [--source pydoc] [--context 1024] [--budget 256]
        [--steps 4] [--json]

Decodes `steps` teacher-forced tokens after a dense prefill through an icecache cache, and at every step, for
each sparse layer and query head, takes the softmax of the query over every key (full attention) and reports
the share of it that each selection rule's tokens hold at the same budget: icecache's clustered pages ranked
by the best q.k among their keys (`key`), by Quest's channel max/min bound (`bound`), by q . centroid, and by
their true attention mass (the oracle for these pages); quest's contiguous pages by its bound and by their
mass; the best `budget` tokens (the ceiling). Beside them, why the bound ranks clusters badly: the rank
correlation of the bound with the best key over the pages, of the bound's slack (bound - best key) with a
page's spread (the norm of kmax - kmin), for clusters and for quest's pages, and how wide the bound's top pages
are against the best key's (relative to the mean page).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


def spearman(a, b) -> float:
    """Rank correlation of two 1-D tensors."""
    from scipy.stats import spearmanr

    return float(spearmanr(a.tolist(), b.tolist()).statistic)


def page_mass(probs, score, count, pos, budget: int, always, group: int) -> float:
    """Mean attention mass over query heads of `always` plus the best-scored pages whose tokens fit `budget`
    (in score order, stopping at the first that overflows, as icecache does). score [Hq, pages], count/pos
    per KV head."""
    import torch

    out = []
    for h in range(probs.shape[0]):
        g = h // group
        order = score[h].argsort(descending=True)
        c = count[g][order]
        chosen = order[(torch.cumsum(c, 0) <= budget) & (c > 0)]
        mark = always.clone()
        tokens = pos[g][chosen].flatten()
        mark[tokens[tokens >= 0]] = True
        out.append(float((probs[h] * mark).sum()))
    return sum(out) / len(out)


def measure(layer, page_size: int = 16) -> dict:
    """One decode step of one IceLayer: the figures above for its last query."""
    import torch

    from toolpath.policies.kvcache.quest_layer import page_bounds, page_scores

    q = layer.last_query[0, :, -1].float()  # [Hq, D]
    keys = layer.materialize()[0][0].float()  # [Hkv, T, D]
    hkv, t, d = keys.shape
    hq = q.shape[0]
    group = hq // hkv
    probs = ((q.unsqueeze(1) @ keys.repeat_interleave(group, 0).transpose(1, 2)).squeeze(1) / math.sqrt(d)).softmax(-1)
    idx = layer.index
    always = torch.zeros(t, dtype=torch.bool)
    always[: layer.keys.shape[-2]] = True
    always[layer.tail_pos] = True
    pos, count = idx.pos, idx.count
    rest = layer.cluster_budget()
    by = {rule: idx.scores(q.view(hkv, group, d), rule=rule).reshape(hq, -1) for rule in ("key", "bound", "centroid")}
    oracle = torch.stack([(probs[h][pos[h // group].clamp(min=0)] * (pos[h // group] >= 0)).sum(-1)
                          for h in range(hq)])
    out = {"sink_and_recent": float((probs * always).sum(-1).mean())}
    for name, score in (*by.items(), ("oracle", oracle)):
        out[f"icecache_{name}"] = page_mass(probs, score, count, pos, rest, always, group)
    n_pages = -(-t // page_size)
    qpos = torch.arange(n_pages * page_size).view(n_pages, page_size)
    qpos = qpos.masked_fill(qpos >= t, -1)
    qcount = (qpos >= 0).sum(-1)
    kmax, kmin = page_bounds(keys.unsqueeze(0), page_size)
    qbound = page_scores(q.unsqueeze(0), kmax, kmin)[0]
    qsel = qbound.clone()
    qsel[:, -1] = float("inf")  # quest always keeps the newest page
    qmass = torch.stack([(probs[h][qpos.clamp(min=0)] * (qpos >= 0)).sum(-1) for h in range(hq)])
    qmass[:, -1] = float("inf")
    none = torch.zeros(t, dtype=torch.bool)
    whole = int(layer.budget) // page_size * page_size
    qp, qc = qpos.expand(hkv, -1, -1), qcount.expand(hkv, -1)
    out["quest_bound"] = page_mass(probs, qsel, qc, qp, whole, none, group)
    out["quest_oracle"] = page_mass(probs, qmass, qc, qp, whole, none, group)
    out["best_tokens"] = float(probs.topk(int(layer.budget), -1).values.sum(-1).mean())
    padded = torch.nn.functional.pad(keys, (0, 0, 0, n_pages * page_size - t), value=float("nan"))
    qbest = torch.einsum("hd,hcpd->hcp", q, padded.view(hkv, n_pages, page_size, d).repeat_interleave(group, 0))
    qbest = qbest.nan_to_num(nan=-float("inf")).amax(-1)
    width = (idx.kmax - idx.kmin).norm(dim=-1)
    qwidth = (kmax[0] - kmin[0]).norm(dim=-1)
    stats: dict = {}
    for h in range(hq):
        g, used = h // group, count[h // group] > 0
        key, bound, w = by["key"][h][used], by["bound"][h][used], width[g][used]
        for name, value in (
                ("rank_corr_bound_best_key_clusters", spearman(bound, key)),
                ("rank_corr_bound_best_key_quest_pages", spearman(qbound[h], qbest[h])),
                ("rank_corr_slack_spread_clusters", spearman(bound - key, w)),
                ("rank_corr_slack_spread_quest_pages", spearman(qbound[h] - qbest[h], qwidth[g])),
                ("spread_of_top8_by_bound_to_mean", float(w[bound.argsort(descending=True)[:8]].mean() / w.mean())),
                ("spread_of_top8_by_best_key_to_mean", float(w[key.argsort(descending=True)[:8]].mean() / w.mean()))):
            stats.setdefault(name, []).append(value)
    out.update({k: sum(v) / len(v) for k, v in stats.items()})
    out["mean_page_fill"] = float(count[count > 0].float().mean())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="local")
    ap.add_argument("--source", default="pydoc", help="pydoc or stdlib-docs (benchmarks/kvcache_sparse.py)")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--budget", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.context <= args.budget:
        raise SystemExit("--steps must be >= 1 and --context larger than --budget (else no step is sparse)")

    import kvcache_sparse as ks
    import torch

    torch.set_num_threads(1)
    model, tok = ks.load(args.model)
    ids = tok(ks.source_text(args.source), return_tensors="pt", add_special_tokens=False).input_ids
    ids = ids[:, : args.context + args.steps]
    full = ks.prefill(model, ids[:, : args.context - 1])
    cache = ks.cache_for(model, full, "icecache", args.budget)
    figures: dict = {}
    with torch.no_grad():
        for step in range(args.steps):
            model(ids[:, args.context - 1 + step: args.context + step], cache=cache)
            for layer in cache.layers:
                if not layer.dense:
                    for name, value in measure(layer).items():
                        figures.setdefault(name, []).append(value)
    out = {"model": args.model, "source": args.source, "context": args.context, "budget": args.budget,
           "steps": args.steps, **{k: sum(v) / len(v) for k, v in figures.items()}}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for key, value in out.items():
            print(f"{key:40s} {value:.4f}" if isinstance(value, float) else f"{key:40s} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Retrieval on held-out pairs: MetaEmbed at each budget (1,1) … (16,64) against single-vector MiniLM (mean
pooling) and BM25 (bm25s with Snowball stemming, as `search` uses), on the same collections, in one run.

    python benchmarks/retrieval.py [--json] [--plot PATH] [--limit N] [--package-queries N] [--package-passages N]

Two held-out sets from toolpath/train/metaembed_pairs.py's split, one relevant passage per query:
- python: Python reference sections, this repository's Markdown sections and standard-library docstrings of
  held-out documents; the collection searched is every passage of those documents (the set the earlier
  builds were measured on);
- packages: docstrings of held-out installed packages (no module of them seen in training); a seeded draw of
  queries, searched among a seeded draw of those packages' passages that holds every target.
Reported per method and set: recall@1/5/10 (with one relevant passage, the share of queries that find it in
the top k) with 95 % bootstrap intervals for @1 and @5, each budget's recall@5 minus MiniLM's (a paired
interval), nDCG@10, bytes read per item, milliseconds per query (encoding it, one query at a time with the
encoders taking turns; scoring the whole collection); the goals, each met or not. A recall-vs-budget plot (PNG)
of the python set is written to --plot. The spread section says how different an item's vectors are (extra
vectors that copy each other add bytes and no ranking).

Needs the trained model (`toolpath models build metaembed`, under $TOOLPATH_HOME/models/metaembed).

Sections: each is a function (args, shared) -> dict, its result stored under its name in the JSON. `shared`
holds the collection, the held-out pairs and the loaded model, so a section about the same collection (the query
completion part: add its function to SECTIONS as "completion") reuses them rather than re-reading them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BUDGETS = ((1, 1), (2, 4), (4, 8), (4, 16), (8, 16), (16, 64))  # the paper's groups and the goal's 4x16


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def metrics(ranks: list[int]) -> dict:
    """ranks: the 1-based rank of each query's relevant passage."""
    n = len(ranks)
    out = {f"recall@{k}": round(100 * sum(r <= k for r in ranks) / n, 2) for k in (1, 5, 10)}
    out["ndcg@10"] = round(100 * sum(1 / math.log2(r + 1) for r in ranks if r <= 10) / n, 2)
    return out


def rank_of(scores, target: int) -> int:
    return int((scores > scores[target]).sum()) + 1  # ties count in the query's favour only for itself


def load_shared(args) -> dict:
    from toolpath.tools.retrieval import model as M
    from toolpath.train.metaembed_pairs import build_collection

    folder = Path(args.model) if args.model else Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath") \
        / "models" / "metaembed"
    if not (folder / M.WEIGHTS).is_file():
        sys.exit(f"retrieval benchmark: no trained model at {folder}; run `toolpath models build metaembed`")
    log("reading the held-out pairs (Python's text and the installed packages' docstrings)")
    coll = build_collection(packages=True)
    _, held = coll.split()
    heldout = coll.heldout_passages()
    is_package = [coll.passage_doc[i].startswith("package:") for i in range(len(coll.passages))]
    sets = {"python": eval_set(coll, [p for p in held if p.source != "package"],
                               [i for i in heldout if not is_package[i]], args.limit),
            "packages": eval_set(coll, [p for p in held if p.source == "package"],
                                 [i for i in heldout if is_package[i]], args.package_queries, args.package_passages)}
    return {"collection": coll, "sets": sets, "model": M.load(folder), "model_folder": str(folder),
            "packages": coll.packages,
            "training": json.loads((folder / "metaembed.json").read_text()) if (folder / "metaembed.json").is_file()
            else None}


def eval_set(coll, pairs, items: list[int], max_queries: int | None = None, max_items: int | None = None) -> dict:
    """Queries, the passages searched and each query's target among them. At most max_queries pairs and
    max_items passages (the targets always among them, the rest drawn with a fixed seed), so a set the size of
    a whole package's docstrings is measured in minutes."""
    import random

    rng = random.Random(0)
    if max_queries and len(pairs) > max_queries:
        pairs = sorted(rng.sample(pairs, max_queries), key=lambda p: p.passage)
    if max_items and len(items) > max_items:
        targets = {p.passage for p in pairs}
        rest = [i for i in items if i not in targets]
        items = sorted(targets | set(rng.sample(rest, max(0, max_items - len(targets)))))
    position = {p: i for i, p in enumerate(items)}
    return {"texts": [coll.passages[i] for i in items], "queries": [p.query for p in pairs],
            "targets": [position[p.passage] for p in pairs]}


def _interleaved_encode_ms(fns: dict, queries: list[str], n: int) -> dict:
    """Milliseconds per query of each encoder, one query at a time (as a tool call encodes it), over the first n
    queries: the encoders take turns on each query (the order rotating), and each figure is the median of its
    calls, so a burst of load on a shared machine lands on every row alike instead of on whichever row ran then.
    One untimed call each first: a model's first call pays for one-time set-up."""
    import statistics

    names = list(fns)
    for name in names:
        fns[name](queries[0])
    times: dict[str, list[float]] = {name: [] for name in names}
    for i, q in enumerate(queries[:n]):
        for name in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter()
            fns[name](q)
            times[name].append(time.perf_counter() - t)
    return {name: round(1000 * statistics.median(ts), 2) for name, ts in times.items()}


def budgets_section(args, shared: dict) -> dict:
    from toolpath.tools.search import rerank

    model = shared["model"]
    out = {name: _set_rows(model, data) for name, data in shared["sets"].items()}
    queries = shared["sets"]["python"]["queries"]
    log(f"query encoding, {args.timed_queries} queries one at a time, the encoders taking turns")
    encoders = {f"metaembed {nq}x{nd}": (lambda x, nq=nq: model.encode([x], "query", n=nq)) for nq, nd in BUDGETS}
    encoders["minilm mean-pooled"] = lambda x: rerank.embed([x])
    encode_ms = _interleaved_encode_ms(encoders, queries, args.timed_queries)
    for result in out.values():
        for name, ms in encode_ms.items():
            result["rows"][name]["query_encode_ms"] = ms
        result["goals"] = _goals(result["rows"], model.config)
    plot = _plot(out["python"]["rows"], args.plot) if args.plot else None
    return out | {"plot": plot, "query_encode_ms": encode_ms}


def _set_rows(model, data: dict) -> dict:
    import numpy as np

    from toolpath.tools.retrieval.scoring import first_vectors, late_interaction
    from toolpath.tools.search import rerank
    from toolpath.tools.search.text_index import _bm25s, _tokenize, english_stemmer

    texts, queries, targets = data["texts"], data["queries"], data["targets"]
    cfg = model.config
    rows: dict[str, dict] = {}
    hits: dict[str, list[int]] = {}

    log(f"MetaEmbed: encoding {len(texts)} passages ({cfg.nd} vectors each) and {len(queries)} queries")
    t = time.perf_counter()
    docs = model.encode(texts, "doc").astype(np.float16)  # as the index stores them
    doc_s = time.perf_counter() - t
    first = first_vectors(docs)  # what the index keeps in memory for one-vector budgets (read once, untimed)
    qv = model.encode(queries, "query")
    for nq, nd in BUDGETS:
        ranks, score_s = [], 0.0
        for q, target in zip(qv, targets):
            t = time.perf_counter()
            s = late_interaction(q, docs, nq, nd, first=first if nd == 1 else None)
            score_s += time.perf_counter() - t
            ranks.append(rank_of(s, target))
        name = f"metaembed {nq}x{nd}"
        rows[name] = metrics(ranks) | {
            "budget": [nq, nd], "bytes_per_item_read": cfg.dim * 4 if nd == 1 else nd * cfg.dim * 2,
            "bytes_per_item_stored": cfg.nd * cfg.dim * 2, "query_score_ms": round(1000 * score_s / len(queries), 3),
            "doc_encode_ms": round(1000 * doc_s / len(texts), 1)}
        if nd == 1:  # the ablation: the float16 rows read and converted on every query, as before the fast path
            t = time.perf_counter()
            for q in qv:
                late_interaction(q, docs, nq, nd)
            rows[name]["query_score_ms_float16_rows"] = round(1000 * (time.perf_counter() - t) / len(queries), 3)
        hits[name] = ranks
        log(f"  {nq}x{nd}: {rows[name]}")

    log("MiniLM mean pooling (single vector)")
    t = time.perf_counter()
    dv = np.concatenate([rerank.embed(texts[i:i + 32]) for i in range(0, len(texts), 32)])
    doc_s = time.perf_counter() - t
    mq = rerank.embed(queries)
    ranks, score_s = [], 0.0
    for q, target in zip(mq, targets):
        t = time.perf_counter()
        s = dv @ q
        score_s += time.perf_counter() - t
        ranks.append(rank_of(s, target))
    rows["minilm mean-pooled"] = metrics(ranks) | {
        "bytes_per_item_read": dv.shape[1] * 4, "bytes_per_item_stored": dv.shape[1] * 4,
        "query_score_ms": round(1000 * score_s / len(queries), 3), "doc_encode_ms": round(1000 * doc_s / len(texts), 1)}
    hits["minilm mean-pooled"] = ranks
    log(f"  {rows['minilm mean-pooled']}")

    log("BM25 (bm25s, Snowball stemming)")
    bm25s, stemmer = _bm25s(), english_stemmer()
    retriever = bm25s.BM25()
    retriever.index(_tokenize(texts, stemmer), show_progress=False)
    ranks, score_s = [], 0.0
    for q, target in zip(queries, targets):
        t = time.perf_counter()
        tokens = [w for w in _tokenize([q], stemmer)[0] if w in retriever.vocab_dict]
        s = retriever.get_scores(tokens) if tokens else np.zeros(len(texts))
        score_s += time.perf_counter() - t
        ranks.append(rank_of(np.asarray(s), target))
    rows["bm25"] = metrics(ranks) | {"query_score_ms": round(1000 * score_s / len(queries), 3)}
    hits["bm25"] = ranks
    log(f"  {rows['bm25']}")
    _add_intervals(rows, hits)
    return {"queries": len(queries), "collection": len(texts), "rows": rows}


def _add_intervals(rows: dict, ranks: dict) -> None:
    """95 % bootstrap intervals of recall@1 and @5, and of each MetaEmbed budget's recall@5 minus MiniLM's on
    the same queries (paired: the resampled queries are the same for both)."""
    from toolpath.evals.intervals import bootstrap_ci

    base = ranks["minilm mean-pooled"]
    for name, rs in ranks.items():
        for k in (1, 5):
            lo, hi = bootstrap_ci([100.0 * (r <= k) for r in rs])
            rows[name][f"recall@{k}_ci"] = [round(lo, 1), round(hi, 1)]
        if name.startswith("metaembed"):
            lo, hi = bootstrap_ci([100.0 * ((r <= 5) - (b <= 5)) for r, b in zip(rs, base)])
            rows[name]["recall@5_minus_minilm_ci"] = [round(lo, 1), round(hi, 1)]


def _goals(rows: dict, cfg) -> dict:
    single = rows["minilm mean-pooled"]
    r5 = {b: rows[f"metaembed {b}"]["recall@5"] for b in ("1x1", "4x16", "16x64")}
    small = rows["metaembed 1x1"]
    return {
        "recall@5 rises with the budget (1x1 < 4x16 < 16x64)": {
            "met": r5["1x1"] < r5["4x16"] < r5["16x64"], "metaembed": list(r5.values()), "minilm": single["recall@5"]},
        "16x64 >= single-vector MiniLM + 3 points of recall@5": {
            "met": r5["16x64"] >= single["recall@5"] + 3, "metaembed": r5["16x64"], "minilm": single["recall@5"]},
        "1x1's query costs no more than MiniLM's (encode + score ms in this run; vectors)": {
            "met": small["query_encode_ms"] + small["query_score_ms"]
            <= single["query_encode_ms"] + single["query_score_ms"],
            "metaembed": [round(small["query_encode_ms"] + small["query_score_ms"], 2), 1,
                          "the encoder's forward alone" if cfg.pooled_first else "the forward with one meta token"],
            "minilm": [round(single["query_encode_ms"] + single["query_score_ms"], 2), 1, "the encoder's forward"]},
    }


def _plot(rows: dict, path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{nq}x{nd}" for nq, nd in BUDGETS]
    fig, ax = plt.subplots(figsize=(6, 4))
    for metric, style in (("recall@1", "o-"), ("recall@5", "s-"), ("recall@10", "^-")):
        ax.plot(labels, [rows[f"metaembed {b}"][metric] for b in labels], style, label=f"MetaEmbed {metric}")
    for name, colour in (("minilm mean-pooled", "grey"), ("bm25", "tab:red")):
        ax.axhline(rows[name]["recall@5"], color=colour, linestyle="--", label=f"{name} recall@5")
    ax.set_xlabel("budget (query x document vectors)")
    ax.set_ylabel("recall (%)")
    ax.set_title("Held-out retrieval: recall vs budget")
    ax.legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(Path(path).resolve())


def spread_section(args, shared: dict) -> dict:
    """How different an item's vectors are, on the first --spread-items held-out Python queries and passages:
    the mean cosine between two meta vectors (1..) of one item, and between a meta vector and the pooled vector 0.
    Near 1 among themselves, the extra vectors are copies, and a larger budget reads more bytes for the same
    ranking."""
    import numpy as np

    model, data = shared["model"], shared["sets"]["python"]
    n = args.spread_items
    out = {}
    for side, texts in (("query", data["queries"][:n]), ("doc", data["texts"][:n])):
        v = model.encode(texts, side)
        meta = v[:, 1:]
        k = meta.shape[1]
        among = (np.einsum("ijc,ikc->i", meta, meta) - k) / max(k * (k - 1), 1)  # off-diagonal mean per item
        out[side] = {"items": len(texts), "meta_among_themselves": round(float(among.mean()), 4),
                     "meta_vs_pooled": round(float((meta * v[:, :1]).sum(-1).mean()), 4)}
    log(f"vector spread: {out}")
    return out


# The query-completion part adds its section here ("completion": its function), run after the budgets.
SECTIONS = {"budgets": budgets_section, "spread": spread_section}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--plot", default=str(Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath")
                                          / "reports" / "retrieval_recall_vs_budget.png"),
                    help="where the recall-vs-budget PNG goes (default under $TOOLPATH_HOME/reports; '' for none)")
    ap.add_argument("--model", help="a MetaEmbed folder (default $TOOLPATH_HOME/models/metaembed)")
    ap.add_argument("--limit", type=int, help="at most N held-out queries of Python's text")
    ap.add_argument("--package-queries", type=int, default=400, help="held-out package queries (drawn, seed 0)")
    ap.add_argument("--package-passages", type=int, default=1500,
                    help="passages of the held-out packages searched (their targets always among them)")
    ap.add_argument("--timed-queries", type=int, default=50, help="queries encoded one at a time for the ms figures")
    ap.add_argument("--spread-items", type=int, default=60, help="held-out items the spread section encodes")
    ap.add_argument("--section", action="append", choices=sorted(SECTIONS), help="run only these (default: all)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    shared = load_shared(args)
    out = {"model": shared["model_folder"], "training": (shared["training"] or {}).get("training"),
           "training_seconds": (shared["training"] or {}).get("seconds"), "threads": args.threads,
           "packages": shared["packages"]}
    for name in args.section or list(SECTIONS):
        out[name] = SECTIONS[name](args, shared)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    b = out.get("budgets")
    for name in ("python", "packages") if b else ():
        r = b[name]
        print(f"{name}: {r['queries']} held-out queries, {r['collection']} passages")
        print(f"{'METHOD':<22} {'R@1':>6} {'R@1 95%':>13} {'R@5':>6} {'R@5 95%':>13} {'R@10':>6} {'BYTES/ITEM':>11} "
              f"{'ENC ms':>7} {'SCORE ms':>9}")
        for method, row in r["rows"].items():
            ci1, ci5 = row["recall@1_ci"], row["recall@5_ci"]
            print(f"{method:<22} {row['recall@1']:>6.1f} {f'{ci1[0]}-{ci1[1]}':>13} {row['recall@5']:>6.1f} "
                  f"{f'{ci5[0]}-{ci5[1]}':>13} {row['recall@10']:>6.1f} {row.get('bytes_per_item_read', ''):>11} "
                  f"{row.get('query_encode_ms', ''):>7} {row['query_score_ms']:>9}")
        for goal, g in r["goals"].items():
            print(f"{'met' if g['met'] else 'NOT MET'}: {goal} ({g['metaembed']} vs {g['minilm']})")
    if b and b["plot"]:
        print(f"plot: {b['plot']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Retrieval on held-out pairs: MetaEmbed at each budget (1,1) … (16,64) against single-vector MiniLM (mean
pooling) and BM25 (bm25s with Snowball stemming, as `search` uses), on the same collection, in one run.

    python benchmarks/retrieval.py [--json] [--plot PATH] [--limit N] [--section budgets]

The pairs are toolpath/train/metaembed_pairs.py's held-out split (documents never seen in training: Python
reference sections, this repository's Markdown sections, standard-library docstrings), one relevant passage per
query; the collection searched is every passage of the held-out documents. Reported per method: recall@1/5/10
(with one relevant passage, the share of queries that find it in the top k) and nDCG@10; bytes stored per item;
milliseconds per query (encoding the query, and scoring the whole collection, each averaged); the goals of the
issue, each met or not. A recall-vs-budget plot (PNG) is written to --plot.

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

BUDGETS = ((1, 1), (2, 4), (4, 8), (8, 16), (16, 64))


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
    coll = build_collection()
    _, held = coll.split()
    items = coll.heldout_passages()
    if args.limit:
        held = held[:args.limit]
    position = {p: i for i, p in enumerate(items)}
    return {"collection": coll, "pairs": held, "items": items, "texts": [coll.passages[i] for i in items],
            "targets": [position[p.passage] for p in held], "queries": [p.query for p in held],
            "model": M.load(folder), "model_folder": str(folder),
            "training": json.loads((folder / "metaembed.json").read_text()) if (folder / "metaembed.json").is_file()
            else None}


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
    import numpy as np

    from toolpath.tools.retrieval.scoring import late_interaction
    from toolpath.tools.search import rerank
    from toolpath.tools.search.text_index import _bm25s, _tokenize, english_stemmer

    model, texts, queries, targets = shared["model"], shared["texts"], shared["queries"], shared["targets"]
    cfg = model.config
    rows: dict[str, dict] = {}

    log(f"MetaEmbed: encoding {len(texts)} passages ({cfg.nd} vectors each) and {len(queries)} queries")
    t = time.perf_counter()
    docs = model.encode(texts, "doc").astype(np.float16)  # as the index stores them
    doc_s = time.perf_counter() - t
    qv = model.encode(queries, "query")
    for nq, nd in BUDGETS:
        ranks, score_s = [], 0.0
        for q, target in zip(qv, targets):
            t = time.perf_counter()
            s = late_interaction(q, docs, nq, nd)
            score_s += time.perf_counter() - t
            ranks.append(rank_of(s, target))
        rows[f"metaembed {nq}x{nd}"] = metrics(ranks) | {
            "budget": [nq, nd], "bytes_per_item_read": nd * cfg.dim * 2, "bytes_per_item_stored": cfg.nd * cfg.dim * 2,
            "query_score_ms": round(1000 * score_s / len(queries), 3),
            "doc_encode_ms": round(1000 * doc_s / len(texts), 1)}
        log(f"  {nq}x{nd}: {rows[f'metaembed {nq}x{nd}']}")

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
    log(f"  {rows['minilm mean-pooled']}")

    log(f"query encoding, {args.timed_queries} queries one at a time, the encoders taking turns")
    encoders = {f"metaembed {nq}x{nd}": (lambda x, nq=nq: model.encode([x], "query", n=nq)) for nq, nd in BUDGETS}
    encoders["minilm mean-pooled"] = lambda x: rerank.embed([x])
    for name, ms in _interleaved_encode_ms(encoders, queries, args.timed_queries).items():
        rows[name]["query_encode_ms"] = ms

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
    log(f"  {rows['bm25']}")

    single, full, small = rows["minilm mean-pooled"], rows[f"metaembed {BUDGETS[-1][0]}x{BUDGETS[-1][1]}"], \
        rows[f"metaembed {BUDGETS[0][0]}x{BUDGETS[0][1]}"]
    goals = {
        "16x64 beats single-vector MiniLM on recall@5": {
            "met": full["recall@5"] > single["recall@5"], "metaembed": full["recall@5"], "minilm": single["recall@5"]},
        "1x1 loses at most 2 points of recall@5 to single-vector MiniLM": {
            "met": small["recall@5"] >= single["recall@5"] - 2, "metaembed": small["recall@5"],
            "minilm": single["recall@5"]},
        "1x1 costs no more than single-vector MiniLM (bytes read per item, ms per query)": {
            "met": small["bytes_per_item_read"] <= single["bytes_per_item_read"]
            and (small["query_encode_ms"] + small["query_score_ms"]
                 <= single["query_encode_ms"] + single["query_score_ms"]),
            "metaembed": [small["bytes_per_item_read"], round(small["query_encode_ms"] + small["query_score_ms"], 2)],
            "minilm": [single["bytes_per_item_read"], round(single["query_encode_ms"] + single["query_score_ms"], 2)]},
    }
    plot = _plot(rows, args.plot) if args.plot else None
    return {"queries": len(queries), "collection": len(texts), "rows": rows, "goals": goals, "plot": plot}


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


# The query-completion part adds its section here ("completion": its function), run after the budgets.
SECTIONS = {"budgets": budgets_section}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--plot", default=str(Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath")
                                          / "reports" / "retrieval_recall_vs_budget.png"),
                    help="where the recall-vs-budget PNG goes (default under $TOOLPATH_HOME/reports; '' for none)")
    ap.add_argument("--model", help="a MetaEmbed folder (default $TOOLPATH_HOME/models/metaembed)")
    ap.add_argument("--limit", type=int, help="at most N held-out queries")
    ap.add_argument("--timed-queries", type=int, default=50, help="queries encoded one at a time for the ms figures")
    ap.add_argument("--section", action="append", choices=sorted(SECTIONS), help="run only these (default: all)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    shared = load_shared(args)
    out = {"model": shared["model_folder"], "training": (shared["training"] or {}).get("training"),
           "training_seconds": (shared["training"] or {}).get("seconds"), "threads": args.threads}
    for name in args.section or list(SECTIONS):
        out[name] = SECTIONS[name](args, shared)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    b = out.get("budgets")
    if b:
        print(f"{b['queries']} held-out queries, {b['collection']} passages")
        print(f"{'METHOD':<22} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'nDCG@10':>8} {'BYTES/ITEM':>11} {'ENC ms':>7} "
              f"{'SCORE ms':>9}")
        for name, r in b["rows"].items():
            print(f"{name:<22} {r['recall@1']:>6.1f} {r['recall@5']:>6.1f} {r['recall@10']:>6.1f} {r['ndcg@10']:>8.1f} "
                  f"{r.get('bytes_per_item_read', ''):>11} {r.get('query_encode_ms', ''):>7} {r['query_score_ms']:>9}")
        for goal, g in b["goals"].items():
            print(f"{'met' if g['met'] else 'NOT MET'}: {goal} ({g['metaembed']} vs {g['minilm']})")
        if b["plot"]:
            print(f"plot: {b['plot']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

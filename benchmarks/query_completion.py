"""Quality-controllable query completion on held-out images: image retrieval with a 1-2-word query as typed, against
the same query completed by `complete_query` at each level, in one run.

    python benchmarks/query_completion.py [--json] [--images N] [--samples S] [--k K] [--model auto]

The gallery: held-out pictures (easy-vqa's test split and scenes of the held-out stream, never trained on), each
in a degraded copy drawn as the training corpus draws them (blur, noise, under/over-exposure or none), so their
measured quality (tools/retrieval/image_quality.py) varies. The queries: the gallery's shapes, colours and
colour-shape pairs that have at least K relevant pictures. A picture is relevant to a query when one of its known
objects has the query's colour and/or shape. The retriever: the quality-aware tiny CLIP the build writes
(models/query-completion/retriever), the same for raw and completed queries.

Reported per condition (the raw query; completions at quality low/medium/high with relevance high; relevance
low/medium with quality high), averaged over queries and S sampled completions each: precision@K (the share of the
top K that is relevant), recall@K (the share of the relevant pictures in the top K), the mean measured quality of
the top K, and each as a ratio against the raw query; how many completions held every word of the query as the
model wrote them (complete_query puts the query in front of one that did not); then the goals: completion raises
precision, and the requested quality orders the retrieved quality (high > medium > low), with the share of
queries where high > low. Last, the retriever alone: the mean quality it retrieves for each query put after each
quality wording of the training captions ("a blurry picture of a red circle"), which bounds what a completion's
words can steer.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CONDITIONS = (("high", "low"), ("high", "medium"), ("high", "high"), ("low", "high"), ("medium", "high"))


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def gallery(n: int, seed: int):
    from toolpath.train import query_completion_data as qd
    from toolpath.train import vlm_data as vd

    held = vd.easy_vqa_examples("test")[:n] + vd.scenes(n, seed, heldout=True)
    return qd.degraded_pictures(held, seed + 1)


def queries(pictures, k: int, limit: int) -> list[str]:
    from collections import Counter

    from toolpath.train import query_completion_data as qd

    counts: Counter = Counter()
    for p in pictures:
        for c, s in set(p.objects):
            counts.update({s, c, f"{c} {s}"})
    candidates = [q for q, _ in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]
    picked = [q for q in candidates if sum(qd.relevant(p.objects, q) for p in pictures) >= k]
    singles = [q for q in picked if " " not in q][:limit // 2]
    pairs = [q for q in picked if " " in q][:limit - len(singles)]
    return singles + pairs


class Retriever:
    def __init__(self, folder: Path, pictures):
        import torch
        import torch.nn.functional as F
        from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

        from toolpath.train import clip_training as ct

        self.clip = CLIPModel.from_pretrained(str(folder), local_files_only=True).eval()
        self.tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        proc = AutoImageProcessor.from_pretrained(str(folder), local_files_only=True)
        pixels = ct.pixel_values(proc, [p.image for p in pictures])
        with torch.inference_mode():
            self.images = torch.cat([F.normalize(self.clip.get_image_features(pixel_values=pixels[i:i + 256])
                                                 .pooler_output, dim=-1) for i in range(0, len(pixels), 256)])

    def top(self, text: str, k: int) -> list[int]:
        import torch
        import torch.nn.functional as F

        with torch.inference_mode():
            t = self.tok([text], truncation=True, return_tensors="pt",
                         max_length=self.clip.config.text_config.max_position_embeddings)
            q = F.normalize(self.clip.get_text_features(**t).pooler_output, dim=-1)[0]
        scores = (self.images @ q).numpy()
        return [int(i) for i in (-scores).argsort(kind="stable")[:k]]


def measure(retriever, pictures, text: str, query: str, k: int) -> dict:
    from toolpath.train import query_completion_data as qd

    top = retriever.top(text, k)
    rel = [qd.relevant(pictures[i].objects, query) for i in top]
    total = sum(qd.relevant(p.objects, query) for p in pictures)
    return {"precision": sum(rel) / k, "recall": sum(rel) / max(total, 1),
            "quality": sum(pictures[i].quality.score for i in top) / k}


def mean(rows: list[dict]) -> dict:
    return {m: round(sum(r[m] for r in rows) / len(rows), 4) for m in ("precision", "recall", "quality")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--images", type=int, default=300, help="held-out pictures per source (default 300 + 300)")
    ap.add_argument("--queries", type=int, default=20, help="at most this many queries (default 20)")
    ap.add_argument("--samples", type=int, default=2, help="sampled completions per query and condition (default 2)")
    ap.add_argument("--k", type=int, default=10, help="retrieved pictures per query (default 10)")
    ap.add_argument("--model", default="query-completion", help="complete_query's model (default query-completion)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch

    from toolpath.tools.registry import ToolError
    from toolpath.tools.retrieval import query_completion as qc
    from toolpath.train import query_completion_data as qd

    torch.set_num_threads(1)
    folder = qc.finetuned_folder()
    retriever_dir = folder / "retriever"
    if not (retriever_dir / "config.json").is_file():
        sys.exit(f"query-completion benchmark: no build at {folder}; run `{qc.BUILD_COMMAND}`")
    t0 = time.monotonic()
    pictures = gallery(args.images, args.seed)
    qs = queries(pictures, args.k, args.queries)
    retriever = Retriever(retriever_dir, pictures)
    log(f"{len(pictures)} held-out pictures, {len(qs)} queries: {', '.join(qs)}")

    raw = {q: measure(retriever, pictures, q, q, args.k) for q in qs}
    results = {"raw": {"per_query": raw, **mean(list(raw.values()))}}
    examples = {}
    for rel, qual in CONDITIONS:
        name = f"relevance={rel},quality={qual}"
        per_query, seconds, kept = {}, 0.0, 0
        for q in qs:
            rows = []
            for s in range(args.samples):
                t = time.monotonic()
                try:
                    done = qc.complete(q, rel, qual, args.model, seed=args.seed + s)
                except ToolError as err:
                    sys.exit(f"query-completion benchmark: {err}")
                seconds += time.monotonic() - t
                kept += bool(done["caption"]) and done["completion"] == done["caption"]
                rows.append(measure(retriever, pictures, done["completion"], q, args.k))
                if s == 0 and len(examples.get(name, [])) < 4:
                    examples.setdefault(name, []).append(done["completion"])
            per_query[q] = mean(rows)
        results[name] = {"per_query": per_query, **mean(list(per_query.values())),
                         "seconds_per_completion": round(seconds / (len(qs) * args.samples), 3),
                         "model_kept_the_query": f"{kept}/{len(qs) * args.samples}"}
        log(f"{name}: precision@{args.k} {results[name]['precision']:.3f} quality {results[name]['quality']:.3f}")
    # The retriever alone: the query under each quality wording the training captions use, no language model.
    # A completion can steer the retrieved quality only as far as the retriever follows these words.
    wordings = {w: f"a {w} picture of" for w in ("sharp, clean", "blurry", "noisy", "dark", "washed-out")}
    wordings["plain"] = "a picture of"
    retriever_alone = {w: mean([measure(retriever, pictures, f"{phrase} {qd.article(q)} {q}", q, args.k) for q in qs])
                       for w, phrase in wordings.items()}
    base = results["raw"]
    for _name, r in results.items():
        r["ratios"] = {m: round(r[m] / base[m], 3) if base[m] else None for m in ("precision", "recall", "quality")}
    lo, mid, hi = (results[f"relevance=high,quality={x}"] for x in ("low", "medium", "high"))
    wins = sum(hi["per_query"][q]["quality"] > lo["per_query"][q]["quality"] for q in qs)
    best_precision = max(results[f"relevance={r},quality={k}"]["precision"] for r, k in CONDITIONS)
    goals = {
        "completion raises precision (best level vs raw)": best_precision > base["precision"],
        "high-relevance completion raises precision": hi["precision"] > base["precision"],
        "quality high > low (mean retrieved quality)": hi["quality"] > lo["quality"],
        "quality high > medium > low": hi["quality"] > mid["quality"] > lo["quality"],
    }
    out = {"pictures": len(pictures), "queries": qs, "k": args.k, "samples": args.samples, "model": args.model,
           "seed": args.seed, "results": results, "queries_where_high_beats_low": f"{wins}/{len(qs)}",
           "goals": goals, "examples": examples, "retriever_alone": retriever_alone,
           "seconds": round(time.monotonic() - t0, 1)}
    report = folder / "query_completion.json"
    if report.is_file():
        out["build"] = {k: v for k, v in json.loads(report.read_text()).items() if k in ("seed", "quality_edges",
                                                                                     "relevance_edges", "seconds")}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{len(pictures)} held-out pictures, {len(qs)} queries, top {args.k}, {args.samples} completions each "
          f"(model {args.model})")
    print(f"{'condition':<32} {'prec@k':>7} {'recall@k':>8} {'quality':>8}   ratios vs raw (prec, recall, quality)")
    for name, r in results.items():
        ra = r["ratios"]
        kept = f"   query kept {r['model_kept_the_query']}" if "model_kept_the_query" in r else ""
        print(f"{name:<32} {r['precision']:>7.3f} {r['recall']:>8.3f} {r['quality']:>8.3f}   "
              f"{ra['precision']:.2f} {ra['recall']:.2f} {ra['quality']:.2f}{kept}")
    print(f"queries where quality=high retrieves higher quality than quality=low: {wins}/{len(qs)}")
    print("the retriever alone, the query after each quality wording (no completion): quality of the top "
          f"{args.k}: " + ", ".join(f"{w} {r['quality']:.3f}" for w, r in retriever_alone.items()))
    for goal, met in goals.items():
        print(f"goal {'met' if met else 'NOT met'}: {goal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

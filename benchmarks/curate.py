"""AskLLM against the perplexity baseline, and density sampling's coverage, on a corpus built here.

    python benchmarks/curate.py [--model local:qwen2.5-coder-1.5b] [--engine onnxruntime] [--weights int4]
                                [--per-half 200] [--json]

The corpus: --per-half clean paragraphs (prose from documentation every installation ships: the Python reference's
pydoc topics, toolpath/pydoc_text.py, and the long descriptions in installed packages' METADATA) and as many
corrupted ones, made by script from other clean paragraphs, one kind in turn: sentences of three paragraphs
shuffled together, site boilerplate, spam keyword lists, a paragraph truncated after a few words, one sentence
repeated. Seeded: the same installation gives the same corpus.

Reported: AUROC of clean against corrupted for AskLLM (P(yes), toolpath/curate/askllm.py) and for the perplexity
baseline (mean log-likelihood, on torch), each with a bootstrap 95 % interval, per corruption kind too; and for
density sampling at 10 % (inverse propensity over MiniLM kernel density) against uniform random samples of the
same size, the share of k-means(20) clusters of the corpus's embeddings a sample covers, averaged over seeds; and,
as the reference for what any sampler blind to the clusters can reach, farthest-point sampling (the k-center
greedy: each pick the text farthest from those already picked), from each seed's random first text.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KINDS = ("shuffled", "boilerplate", "spam", "truncated", "repeated")
CLUSTERS = 20
SAMPLE_SHARE = 0.10
SEEDS = 50
BANDWIDTH_SCALES = (1.0, 0.5, 0.25, 0.1, 0.05)
GOAL_AUROC = 0.85
GOAL_COVERAGE = 0.90


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ---- the corpus ---------------------------------------------------------------------------------------------
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _prose(paragraph: str) -> str | None:
    """The paragraph on one line when it reads as prose (sentences of words, no code, tables or markup)."""
    lines = paragraph.strip().splitlines()
    if any(line.startswith((" ", "\t", ">>>", "$", "|", "`", "*", "#", "-", "=", "+", ".."))
           or line.rstrip().endswith("::") for line in lines):
        return None
    text = " ".join(line.strip() for line in lines)
    letters = sum(c.isalpha() or c.isspace() for c in text)
    if not 200 <= len(text) <= 1500 or letters < 0.85 * len(text) or len(_SENTENCE.split(text)) < 2:
        return None
    if re.search(r"https?://|\{|\}|<|>|\[!", text):  # links, markup, badges
        return None
    return text


def clean_paragraphs() -> list[str]:
    """Prose paragraphs of the pydoc topics and of installed packages' descriptions, each once, in a fixed order."""
    import importlib.metadata

    from toolpath.pydoc_text import topics_text

    texts = [topics_text()]
    for dist in sorted(importlib.metadata.distributions(), key=lambda d: (d.metadata.get("Name") or "").lower()):
        if (dist.metadata.get("Name") or "").lower() == "toolpath":  # our own README: about this project, in flux
            continue
        texts.append(dist.metadata.get_payload() or dist.metadata.get("Description") or "")
    seen, out = set(), []
    for text in texts:
        for paragraph in re.split(r"\n\s*\n", text):
            prose = _prose(paragraph)
            if prose and prose not in seen:
                seen.add(prose)
                out.append(prose)
    return out


NAV = ["Home", "About us", "Contact", "Privacy Policy", "Terms of Use", "Careers", "Blog", "Login", "Sign up",
       "Cart", "Help Center", "Sitemap", "Press", "FAQ", "Shipping", "Returns"]
LEGAL = ["All rights reserved.", "We use cookies to improve your experience.", "Accept all cookies.",
         "Subscribe to our newsletter.", "Follow us on social media.", "Powered by WordPress.",
         "By continuing you agree to our terms.", "Back to top.", "Skip to main content.", "Share this page."]
GOODS = ["cheap watches", "best price", "free shipping", "weight loss pills", "online casino", "discount shoes",
         "replica bags", "crypto bonus", "payday loans", "buy followers", "viagra online", "hot deals", "coupon codes",
         "luxury handbags", "win money fast", "click here now"]


def corrupt(kind: str, rng: random.Random, pool: list[str]) -> str:
    """One corrupted paragraph of `kind`, made from paragraphs drawn from `pool`."""
    if kind == "shuffled":
        sentences = [s for p in rng.sample(pool, 3) for s in _SENTENCE.split(p)]
        rng.shuffle(sentences)
        return " ".join(sentences[:8])
    if kind == "boilerplate":
        nav = " | ".join(rng.sample(NAV, 8))
        return f"{nav}\n{' '.join(rng.sample(LEGAL, 5))}\n© {rng.randint(2005, 2024)} Company Inc. {nav}"
    if kind == "spam":
        return ", ".join(rng.choice(GOODS) for _ in range(rng.randint(20, 35)))
    if kind == "truncated":
        words = rng.choice(pool).split()
        return " ".join(words[:rng.randint(5, 12)])
    sentence = rng.choice(_SENTENCE.split(rng.choice(pool)))
    return "\n".join([sentence] * rng.randint(5, 10))


def build_corpus(per_half: int, seed: int = 0) -> list[dict]:
    """per_half clean paragraphs and per_half corrupted ones (from other paragraphs), shuffled; each a dict with
    text, clean (bool) and kind."""
    rng = random.Random(seed)
    paragraphs = clean_paragraphs()
    rng.shuffle(paragraphs)
    if len(paragraphs) < per_half + 30:
        raise SystemExit(f"only {len(paragraphs)} prose paragraphs here; ask for --per-half {len(paragraphs) - 30} "
                         "or fewer")
    clean, pool = paragraphs[:per_half], paragraphs[per_half:]
    rows = [{"text": t, "clean": True, "kind": "clean"} for t in clean]
    rows += [{"text": corrupt(KINDS[i % len(KINDS)], rng, pool), "clean": False, "kind": KINDS[i % len(KINDS)]}
             for i in range(per_half)]
    rng.shuffle(rows)
    return rows


# ---- the measures -------------------------------------------------------------------------------------------
def auroc(scores, labels) -> float:
    """P(a clean text scores above a corrupted one), ties counting half (the Mann-Whitney statistic)."""
    import numpy as np
    from scipy.stats import rankdata

    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    ranks = rankdata(scores)
    pos, neg = labels.sum(), (~labels).sum()
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


def auroc_interval(scores, labels, n: int = 1000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95 % interval of the AUROC, resampling clean and corrupted texts separately."""
    import numpy as np

    rng = np.random.default_rng(seed)
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    pos, neg = np.flatnonzero(labels), np.flatnonzero(~labels)
    values = []
    for _ in range(n):
        idx = np.concatenate([rng.choice(pos, pos.size), rng.choice(neg, neg.size)])
        values.append(auroc(scores[idx], labels[idx]))
    lo, hi = np.quantile(values, [0.025, 0.975])
    return round(float(lo), 4), round(float(hi), 4)


def separation(scores: list[float], rows: list[dict]) -> dict:
    labels = [r["clean"] for r in rows]
    out = {"auroc": round(auroc(scores, labels), 4), "interval": auroc_interval(scores, labels), "by_kind": {}}
    for kind in KINDS:
        keep = [i for i, r in enumerate(rows) if r["clean"] or r["kind"] == kind]
        out["by_kind"][kind] = round(auroc([scores[i] for i in keep], [labels[i] for i in keep]), 4)
    return out


def kmeans(vectors, k: int, seed: int = 0, rounds: int = 50):
    """Cluster labels by Lloyd's k-means from a k-means++ start (seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = [vectors[rng.integers(len(vectors))]]
    for _ in range(k - 1):
        d2 = np.min([((vectors - c) ** 2).sum(1) for c in centres], axis=0)
        centres.append(vectors[rng.choice(len(vectors), p=d2 / d2.sum())])
    centres = np.array(centres)
    labels = None
    for _ in range(rounds):
        new = ((vectors[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)
        if labels is not None and (new == labels).all():
            break
        labels = new
        centres = np.array([vectors[labels == j].mean(0) if (labels == j).any() else centres[j] for j in range(k)])
    return labels


def farthest_points(vectors, k: int, seed: int = 0) -> list[int]:
    """k-center greedy: a seeded random first index, then each time the vector farthest from every one chosen."""
    import numpy as np

    chosen = [int(np.random.default_rng(seed).integers(len(vectors)))]
    nearest = ((vectors - vectors[chosen[0]]) ** 2).sum(1)
    while len(chosen) < min(k, len(vectors)):
        chosen.append(int(nearest.argmax()))
        nearest = np.minimum(nearest, ((vectors - vectors[chosen[-1]]) ** 2).sum(1))
    return chosen


def coverage(rows: list[dict]) -> dict:
    """Share of k-means clusters hit by a 10 % density sample and by a 10 % uniform one, over SEEDS seeds."""
    import numpy as np

    from toolpath.curate.density import BANDWIDTH_SCALE, embeddings, inverse_propensity_sample, kernel_density

    vectors = embeddings([r["text"] for r in rows])
    labels = kmeans(vectors, CLUSTERS)
    k = round(SAMPLE_SHARE * len(rows))
    hit_random = [len(set(labels[np.random.default_rng(seed).choice(len(rows), k, replace=False)])) / CLUSTERS
                  for seed in range(SEEDS)]
    out = {"clusters": CLUSTERS, "sample": k, "seeds": SEEDS,
           "cluster_sizes": sorted(np.bincount(labels, minlength=CLUSTERS).tolist(), reverse=True),
           "random": round(float(np.mean(hit_random)), 4), "random_min": round(float(np.min(hit_random)), 4),
           "farthest_point": round(float(np.mean([len(set(labels[farthest_points(vectors, k, seed)])) / CLUSTERS
                                                  for seed in range(SEEDS)])), 4),
           "by_bandwidth_scale": {}}
    for scale in BANDWIDTH_SCALES:  # the kernel's width against the median squared distance
        density = kernel_density(vectors, scale=scale)
        hits = [len(set(labels[inverse_propensity_sample(density, k, seed)])) / CLUSTERS for seed in range(SEEDS)]
        out["by_bandwidth_scale"][scale] = {"density": round(float(np.mean(hits)), 4),
                                            "density_min": round(float(np.min(hits)), 4)}
    out.update(out["by_bandwidth_scale"][BANDWIDTH_SCALE])  # the default's figures
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="local:qwen2.5-coder-0.5b", help="the proxy model (default the 0.5B)")
    p.add_argument("--engine", help="AskLLM's engine (model.options.engine; default as a run's)")
    p.add_argument("--weights", help="model.options.weights for AskLLM (e.g. int4 on the engine); perplexity runs the "
                                     "model as loaded, on torch")
    p.add_argument("--per-half", type=int, default=200, help="clean paragraphs, and as many corrupted (default 200)")
    p.add_argument("--corpus-seed", type=int, default=0, help="which paragraphs and corruptions (default 0)")
    p.add_argument("--perplexity-model", help="the baseline's model (default --model), on torch")
    p.add_argument("--perplexity-tokens", type=int, default=512, help="tokens of each text the baseline reads")
    p.add_argument("--askllm-shots", default="builtin", help="AskLLM's worked examples: builtin, none (the paper's "
                                                                "zero-shot prompt) or a JSONL file")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--skip", action="append", default=[], choices=("askllm", "perplexity", "density"))
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from toolpath.curate.items import Item
    from toolpath.curate.scoring import score_items

    rows = build_corpus(args.per_half, args.corpus_seed)
    log(f"corpus: {sum(r['clean'] for r in rows)} clean, {sum(not r['clean'] for r in rows)} corrupted")
    result: dict = {"model": args.model, "corpus": len(rows), "per_kind": args.per_half // len(KINDS),
                    "corpus_seed": args.corpus_seed, "askllm_shots": args.askllm_shots}
    options = {k: v for k, v in (("engine", args.engine), ("weights", args.weights)) if v}
    if "askllm" not in args.skip:
        started = time.perf_counter()
        scores = score_items([Item(str(i), r["text"]) for i, r in enumerate(rows)], "askllm", args.model, options,
                             args.batch_size, args.askllm_shots)
        result["askllm"] = {**separation(scores, rows), "seconds": round(time.perf_counter() - started, 1)}
        log(f"askllm: AUROC {result['askllm']['auroc']} {result['askllm']['interval']}")
    if "perplexity" not in args.skip:
        from toolpath.curate import perplexity
        from toolpath.curate.proxy import load_proxy

        started = time.perf_counter()
        proxy = load_proxy(args.perplexity_model or args.model, {}, every_position=True)
        scores = perplexity.score(proxy, [r["text"] for r in rows], max_tokens=args.perplexity_tokens)
        result["perplexity"] = {**separation(scores, rows), "model": proxy.name, "tokens": args.perplexity_tokens,
                                "seconds": round(time.perf_counter() - started, 1)}
        log(f"perplexity: AUROC {result['perplexity']['auroc']} {result['perplexity']['interval']}")
    if "density" not in args.skip:
        result["density"] = coverage(rows)
        log(f"density: {result['density']['density']} of clusters covered, random {result['density']['random']}")
    goals = {}
    if "askllm" in result:
        goals["askllm_auroc_at_least_0.85"] = result["askllm"]["auroc"] >= GOAL_AUROC
        if "perplexity" in result:
            goals["askllm_above_perplexity"] = result["askllm"]["auroc"] > result["perplexity"]["auroc"]
    if "density" in result:
        goals["density_covers_90_percent"] = result["density"]["density"] >= GOAL_COVERAGE
        goals["density_above_random"] = result["density"]["density"] > result["density"]["random"]
    result["goals"] = goals
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

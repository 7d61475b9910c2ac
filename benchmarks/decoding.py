"""Hallucination-mitigated decoding on a local VLM: greedy against VCD, SHIELD, and each SHIELD part alone, in
one run, on the generated POPE set (three splits: accuracy, F1, yes-ratio) and CHAIR captions (CHAIR_s,
CHAIR_i), with seconds per answer and extra forward passes.

    python benchmarks/decoding.py [--model local:tiny-vlm] [--pope-per-split 40] [--chair 30]
                                  [--configs greedy,vcd,shield,...] [--threads 1] [--json]

The questions and captions are asked of the policy directly (one user turn: the image and the question, no
system prompt or tools), as the POPE and CHAIR papers prompt a VLM; `toolpath eval pope --decoding KIND` asks
through the react agent instead. Every configuration sees the same records (seed 0), greedy, so the rows differ
only by the decoding. Answers are read with POPE's own reading (`official`) and ours (`toolpath`); the table
shows the official one, the JSON both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mimetypes
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CONFIGS = {
    "greedy": None,
    "vcd": {"kind": "vcd"},
    "shield": {"kind": "shield"},
    "shield-statistical": {"kind": "shield", "parts": ["statistical"]},
    "shield-inherent": {"kind": "shield", "parts": ["inherent"]},
    "shield-vulnerability": {"kind": "shield", "parts": ["vulnerability"]},
}


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def image_ref(path: str):
    from toolpath.state import ArtifactRef

    data = Path(path).read_bytes()
    return ArtifactRef(sha256=hashlib.sha256(data).hexdigest(), path=str(path),
                       mime=mimetypes.guess_type(path)[0] or "image/png", name=Path(path).name, size=len(data))


def load_policy(model: str, decoding: dict | None):
    from toolpath.policies.base import load
    from toolpath.spec import ModelSpec

    options = {"decoding": decoding} if decoding else {}
    return load(ModelSpec(name=model, max_new_tokens=48, options=options))


def ask(policy, question: str, image: str) -> tuple[str, float, int]:
    from toolpath.state import Message

    started = time.perf_counter()
    resp = policy.respond([Message(role="user", content=question, images=[image_ref(image)])], [])
    extra = int((resp.decoding or {}).get("extra_forward_passes", 0))
    return (resp.answer or resp.text or resp.raw or "").strip(), time.perf_counter() - started, extra


def pope_rows(policy, records) -> dict:
    from toolpath.evals.benchmarks.pope_scoring import pope_figures, reading, sample_counts

    per_split: dict[str, dict[str, list]] = {}
    seconds, extra = [], []
    for r in records:
        answer, dt, passes = ask(policy, r.data["question"], r.data["image"])
        seconds.append(dt)
        extra.append(passes)
        for mode in ("official", "toolpath"):
            said = reading(answer, mode)
            counts = {**sample_counts(r.data["label"], said), "correct": float(said == r.data["label"])}
            per_split.setdefault(mode, {}).setdefault(r.category, []).append(counts)
    out = {mode: {split: {"accuracy": sum(c["correct"] for c in samples) / len(samples), **pope_figures(samples)}
                  for split, samples in splits.items()}
           for mode, splits in per_split.items()}
    return {"figures": out, "seconds": sum(seconds) / max(1, len(seconds)),
            "extra_forward_passes": sum(extra) / max(1, len(extra))}


def chair_rows(policy, records) -> dict:
    from toolpath.evals.benchmarks.chair import PROMPT, caption_counts
    from toolpath.evals.benchmarks.chair_metrics import chair_figures

    samples, seconds, captions = [], [], []
    for r in records:
        caption, dt, _ = ask(policy, PROMPT, r.data["image"])
        counts, bad = caption_counts(r, caption)
        samples.append(counts)
        seconds.append(dt)
        captions.append({"record": r.id, "caption": caption, "hallucinated": bad})
    return {"figures": chair_figures(samples), "seconds": sum(seconds) / max(1, len(seconds)),
            "captions": captions[:5]}


def pope_records(per_split: int, seed: int):
    from toolpath.evals.benchmarks.pope_data import SPLITS, generated_records

    found = generated_records(seed, SPLITS)
    rng = random.Random(seed)  # a sample across the images of both sources, the same for every configuration
    out = []
    for split in SPLITS:
        pool = [r for r in found if r.category == split]
        out.extend(rng.sample(pool, min(per_split, len(pool))))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="local:tiny-vlm")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    p.add_argument("--pope-per-split", type=int, default=40, help="POPE questions per split (default 40)")
    p.add_argument("--chair", type=int, default=30, help="CHAIR captions (default 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        p.error(f"unknown configs: {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    pope = pope_records(args.pope_per_split, args.seed)
    from toolpath.evals.benchmarks.chair import generated_records as chair_generated

    chair = chair_generated(args.seed)
    chair = random.Random(args.seed).sample(chair, min(args.chair, len(chair)))
    results = {}
    for name in names:
        log(f"{name}: loading")
        policy = load_policy(args.model, CONFIGS[name])
        log(f"{name}: POPE, {len(pope)} questions")
        row = {"pope": pope_rows(policy, pope)}
        log(f"{name}: CHAIR, {len(chair)} captions")
        row["chair"] = chair_rows(policy, chair)
        results[name] = row
        f = row["pope"]["figures"]["official"]
        log(f"{name}: POPE acc " + ", ".join(f"{s} {v['accuracy']:.3f}" for s, v in f.items())
            + f"; CHAIR_s {row['chair']['figures'].get('chair_s', 0):.3f}"
            f" CHAIR_i {row['chair']['figures'].get('chair_i', 0):.3f}")
        del policy
    report = {"model": args.model, "pope_per_split": args.pope_per_split, "chair": len(chair), "seed": args.seed,
              "threads": args.threads, "configs": results}
    if "greedy" in results:  # every row against greedy, measured in this run
        base = results["greedy"]
        for _name, row in results.items():
            row["vs_greedy"] = {
                "pope_f1": {s: row["pope"]["figures"]["official"][s]["f1"] - v["f1"]
                            for s, v in base["pope"]["figures"]["official"].items()},
                "chair_i": row["chair"]["figures"].get("chair_i", 0) - base["chair"]["figures"].get("chair_i", 0),
                "seconds_ratio": row["pope"]["seconds"] / max(1e-9, base["pope"]["seconds"])}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    splits = list(next(iter(results.values()))["pope"]["figures"]["official"])
    head = ["decoding"] + [f"{s} acc / F1 / yes" for s in splits] + ["CHAIR_s", "CHAIR_i", "s/answer", "extra passes"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, row in results.items():
        f = row["pope"]["figures"]["official"]
        cells = [name] + [f"{f[s]['accuracy']:.3f} / {f[s]['f1']:.3f} / {f[s]['yes_ratio']:.2f}" for s in splits]
        cf = row["chair"]["figures"]
        cells += [f"{cf.get('chair_s', 0):.3f}", f"{cf.get('chair_i', 0):.3f}", f"{row['pope']['seconds']:.2f}",
                  f"{row['pope']['extra_forward_passes']:.0f}"]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

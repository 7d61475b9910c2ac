"""Hallucination-mitigated decoding on a local VLM: greedy against VCD, SHIELD, and each SHIELD part alone, in
one run, on the generated POPE set (three splits: accuracy, F1, yes-ratio) and CHAIR captions (CHAIR_s,
CHAIR_i), with seconds per answer and extra forward passes.

    python benchmarks/decoding.py [--model local:tiny-vlm] [--pope-per-split 40] [--chair 30]
                                  [--pope-set generated|trained] [--probe] [--statistics]
                                  [--configs greedy,vcd,shield,...] [--threads 1] [--json]

--pope-set trained asks the tiny VLM's own held-out scenes, with popular and adversarial negatives counted over
its training scenes (train/vlm_pope) instead of the generated set's. --probe adds, for the model without a
decoding, where a "yes" comes from: on every POPE question, the yes-minus-no logit margin of the first answer
token with the image and with a uniform grey image of the same size (the image ablated), so a hallucinated yes
that the blind model also gives is the language model's prior, and one the image adds is the encoder's. Accuracy
and F1 carry 95 % bootstrap intervals, and every row its F1 difference from greedy, bootstrapped over the same
resampled questions (paired). --statistics (with --pope-set trained) prints only what the training scenes give
the splits, with no model: whether a coloured shape's top companion repeats between two halves of the training
scenes (and of the generated set's themed scenes, for contrast), and the share of bare-shape negatives per split.

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
    from toolpath.evals.intervals import bootstrap_ci

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
    out = {mode: {split: {"accuracy": sum(c["correct"] for c in samples) / len(samples), **pope_figures(samples),
                          "accuracy_ci": bootstrap_ci([c["correct"] for c in samples]), "f1_ci": f1_ci(samples)}
                  for split, samples in splits.items()}
           for mode, splits in per_split.items()}
    return {"figures": out, "samples": per_split["official"], "seconds": sum(seconds) / max(1, len(seconds)),
            "extra_forward_passes": sum(extra) / max(1, len(extra))}


def resampled_f1(samples: list[dict], draws) -> list[float]:
    """F1 of each bootstrap draw (rows of question indices) of one configuration's samples."""
    from toolpath.evals.benchmarks.pope_scoring import pope_figures

    return [pope_figures([samples[i] for i in row])["f1"] for row in draws]


def bootstrap_draws(n: int, seed: int = 0, resamples: int = 1000):
    import numpy as np

    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def interval(values) -> tuple[float, float]:
    import numpy as np

    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def f1_ci(samples: list[dict]) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of a split's pooled F1 (F1 is not a mean, so intervals.bootstrap_ci
    does not apply)."""
    return interval(resampled_f1(samples, bootstrap_draws(len(samples))))


def f1_gain_ci(samples: list[dict], base: list[dict]) -> tuple[float, float]:
    """Interval of F1(row) − F1(greedy) over the same resampled questions: the two rows answered the same
    records in the same order, so the difference is paired."""
    draws = bootstrap_draws(len(samples))
    return interval([a - b for a, b in zip(resampled_f1(samples, draws), resampled_f1(base, draws))])


# ---- where a yes comes from: the image or the language model's prior ---------------------------------------

def yes_no_ids(tokenizer) -> tuple[list[int], list[int]]:
    """The first token of each way the answer starts: yes/Yes/ yes/ Yes, and no likewise."""
    def first(word: str) -> list[int]:
        return sorted({tokenizer.encode(w, add_special_tokens=False)[0]
                       for w in (word, word.capitalize(), " " + word, " " + word.capitalize())})
    return first("yes"), first("no")


def yes_margin(policy, question: str, image: str, ids) -> float:
    """log P(yes) − log P(no) of the first answer token, over the prompt `ask` sends."""
    import torch

    from toolpath.policies.formats import FORMATS
    from toolpath.state import Message

    inputs, _ = policy._inputs([Message(role="user", content=question, images=[image_ref(image)])], [],
                               FORMATS["json"])
    with torch.inference_mode():
        logits = policy.model(**inputs).logits[0, -1].float()
    yes, no = ids
    return float(torch.logsumexp(logits[yes], 0) - torch.logsumexp(logits[no], 0))


def grey_like(image: str, folder: Path) -> str:
    """A uniform grey image of the same size (the build's blind baseline), written once per size."""
    from PIL import Image

    with Image.open(image) as im:
        size = im.size
    path = folder / f"grey-{size[0]}x{size[1]}.png"
    if not path.is_file():
        Image.new("RGB", size, (128, 128, 128)).save(path)
    return str(path)


def probe_rows(policy, records, folder: Path) -> dict:
    """Per split: the rate of yes (margin > 0) on absent objects with the image and blind; of the absent objects
    the model says yes to, the share it says yes to blind too (the prior) and the mean margin the image adds
    (the image's share); and the image's mean shift on present objects, to show the image carries evidence."""
    import numpy as np

    from toolpath.evals.intervals import mean_figure

    ids = yes_no_ids(policy.tokenizer)
    rows: dict[str, list[tuple[str, float, float]]] = {}
    for r in records:
        seen = yes_margin(policy, r.data["question"], r.data["image"], ids)
        blind = yes_margin(policy, r.data["question"], grey_like(r.data["image"], folder), ids)
        rows.setdefault(r.category, []).append((r.data["label"], seen, blind))
    out = {}
    for split, items in rows.items():
        neg = np.array([(s, b) for label, s, b in items if label == "no"]).reshape(-1, 2)
        pos = np.array([(s, b) for label, s, b in items if label == "yes"]).reshape(-1, 2)
        false_yes = neg[neg[:, 0] > 0]
        out[split] = {
            "negatives": len(neg), "yes_with_image": mean_figure(neg[:, 0] > 0),
            "yes_blind": mean_figure(neg[:, 1] > 0), "false_yes": len(false_yes),
            "false_yes_also_blind": mean_figure(false_yes[:, 1] > 0) if len(false_yes) else None,
            "false_yes_image_shift": mean_figure(false_yes[:, 0] - false_yes[:, 1]) if len(false_yes) else None,
            "negatives_image_shift": mean_figure(neg[:, 0] - neg[:, 1]) if len(neg) else None,
            "positives_image_shift": mean_figure(pos[:, 0] - pos[:, 1]) if len(pos) else None}
    return out


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


def pope_records(per_split: int, seed: int, pope_set: str = "generated"):
    from toolpath.evals.benchmarks.pope_data import SPLITS, generated_records

    if pope_set == "trained":
        from toolpath.train.vlm_pope import records

        found = records(seed, SPLITS)
    else:
        found = generated_records(seed, SPLITS)
    rng = random.Random(seed)  # a sample across the images of both sources, the same for every configuration
    out = []
    for split in SPLITS:
        pool = [r for r in found if r.category == split]
        out.extend(rng.sample(pool, min(per_split, len(pool))))
    return out


def trained_set_statistics(records, seed: int) -> dict:
    """What the training scenes give the adversarial split to work with: whether a coloured shape's top companion
    is repeatable (train/vlm_pope.partner_agreement) in the tiny VLM's training scenes and, for contrast, in the
    generated set's themed scenes; and the share of each split's negatives that are bare shapes."""
    from toolpath.evals.benchmarks.pope_sources import make_scene
    from toolpath.train import vlm_data
    from toolpath.train.vlm_pope import TRAINING_SCENES, partner_agreement

    training = [s.objects for s in vlm_data.scenes(TRAINING_SCENES, seed, size=64)]
    themed = [make_scene(seed, i)[0].shapes for i in range(TRAINING_SCENES)]
    negatives: dict[str, list[str]] = {}
    for r in records:
        if r.data["label"] == "no":
            negatives.setdefault(r.category, []).append(r.data["object"])
    return {"companion_agreement_training_scenes": round(partner_agreement(training), 4),
            "companion_agreement_generated_scenes": round(partner_agreement(themed), 4),
            "bare_shape_negatives": {split: round(sum(" " not in n for n in names) / len(names), 3)
                                     for split, names in negatives.items()}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="local:tiny-vlm")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    p.add_argument("--pope-per-split", type=int, default=40, help="POPE questions per split (default 40)")
    p.add_argument("--chair", type=int, default=30, help="CHAIR captions (default 30; 0: none)")
    p.add_argument("--pope-set", choices=("generated", "trained"), default="generated",
                   help="generated: pope_data's set; trained: the tiny VLM's held-out scenes, negatives from its "
                        "training scenes' statistics")
    p.add_argument("--probe", action="store_true", help="the image-ablation probe of the yes/no margin")
    p.add_argument("--statistics", action="store_true",
                   help="with --pope-set trained: only what the training scenes give the splits (no model needed)")
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
    if args.probe and "greedy" not in names:
        p.error("--probe measures the model without a decoding: add greedy to --configs")
    if args.statistics and args.pope_set != "trained":
        p.error("--statistics describes the trained set: add --pope-set trained")
    pope = pope_records(args.pope_per_split, args.seed, args.pope_set)
    if args.statistics:
        print(json.dumps(trained_set_statistics(pope, args.seed), indent=1))
        return 0
    from toolpath.evals.benchmarks.chair import generated_records as chair_generated

    chair = chair_generated(args.seed) if args.chair > 0 else []
    chair = random.Random(args.seed).sample(chair, min(args.chair, len(chair)))
    results, probe = {}, None
    for name in names:
        log(f"{name}: loading")
        policy = load_policy(args.model, CONFIGS[name])
        if args.probe and probe is None and CONFIGS[name] is None:
            import tempfile

            log(f"{name}: probe, {len(pope)} questions with the image and with a grey one")
            with tempfile.TemporaryDirectory(prefix="decoding-probe-") as folder:
                probe = probe_rows(policy, pope, Path(folder))
        log(f"{name}: POPE, {len(pope)} questions")
        row = {"pope": pope_rows(policy, pope)}
        log(f"{name}: CHAIR, {len(chair)} captions")
        row["chair"] = chair_rows(policy, chair) if chair else {"figures": {}, "seconds": 0.0}
        results[name] = row
        f = row["pope"]["figures"]["official"]
        log(f"{name}: POPE acc " + ", ".join(f"{s} {v['accuracy']:.3f}" for s, v in f.items())
            + f"; CHAIR_s {row['chair']['figures'].get('chair_s', 0):.3f}"
            f" CHAIR_i {row['chair']['figures'].get('chair_i', 0):.3f}")
        del policy
    report = {"model": args.model, "pope_set": args.pope_set, "pope_per_split": args.pope_per_split,
              "chair": len(chair), "seed": args.seed, "threads": args.threads, "configs": results}
    if probe is not None:
        report["probe"] = probe
    if args.pope_set == "trained":
        report["pope_set_statistics"] = trained_set_statistics(pope, args.seed)
    if "greedy" in results:  # every row against greedy, measured in this run
        base = results["greedy"]
        for _name, row in results.items():
            row["vs_greedy"] = {
                "pope_f1": {s: row["pope"]["figures"]["official"][s]["f1"] - v["f1"]
                            for s, v in base["pope"]["figures"]["official"].items()},
                "pope_f1_ci": {s: f1_gain_ci(row["pope"]["samples"][s], base["pope"]["samples"][s])
                               for s in base["pope"]["samples"]},
                "chair_i": row["chair"]["figures"].get("chair_i", 0) - base["chair"]["figures"].get("chair_i", 0),
                "seconds_ratio": row["pope"]["seconds"] / max(1e-9, base["pope"]["seconds"])}
    for row in results.values():
        row["pope"].pop("samples")
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    splits = list(next(iter(results.values()))["pope"]["figures"]["official"])
    head = ["decoding"] + [f"{s} acc / F1 / yes" for s in splits] + ["CHAIR_s", "CHAIR_i", "s/answer", "extra passes"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, row in results.items():
        f = row["pope"]["figures"]["official"]
        cells = [name] + [f"{f[s]['accuracy']:.3f} / {f[s]['f1']:.3f} [{f[s]['f1_ci'][0]:.2f}, {f[s]['f1_ci'][1]:.2f}]"
                          f" / {f[s]['yes_ratio']:.2f}" for s in splits]
        cf = row["chair"]["figures"]
        cells += [f"{cf.get('chair_s', 0):.3f}", f"{cf.get('chair_i', 0):.3f}", f"{row['pope']['seconds']:.2f}",
                  f"{row['pope']['extra_forward_passes']:.0f}"]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

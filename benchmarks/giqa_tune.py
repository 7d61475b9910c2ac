"""Fit assess_quality's region bars (grounded_quality.REGION_EVIDENCE: the mean evidence a region of each type
needs) on a TUNING split of the generated giqa set: seeds other than the evaluation's (benchmarks/giqa.py runs
seed 0), so the figures it reports are on pictures the bars never saw.

    python benchmarks/giqa_tune.py [--seeds 1 2] [--photos FOLDER] [--json]

The candidate regions of every picture are found once (grounded_quality.candidate_regions); then, type by type
and a few rounds over all types, the bar that gives the best sum of mean box mIoU and type accuracy (the benchmark's
description score) is kept.
Prints the fitted bars, to be copied into REGION_EVIDENCE by hand, and the split's figures with them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BARS = [1.0, 1.1, 1.2, 1.35, 1.5, 1.65, 1.8, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 99.0]
ROUNDS = 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--photos", default=None, help="a folder of photos to plant distortions in (besides the scenes)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if 0 in args.seeds:
        ap.error("seed 0 is the evaluation split; tune on other seeds")
    if args.photos:
        os.environ["TOOLPATH_GIQA_PHOTOS"] = args.photos
    import numpy as np
    from PIL import Image

    from toolpath.evals.benchmarks.giqa_data import generated_records
    from toolpath.evals.benchmarks.giqa_scoring import match
    from toolpath.tools.image.distortion_tiles import TYPES
    from toolpath.tools.image.grounded_quality import REGION_EVIDENCE, candidate_regions, select

    pictures = []  # (candidates, truth)
    for seed in args.seeds:
        for r in generated_records(seed):
            if r.category == "des":
                rgb = np.asarray(Image.open(r.data["image"]).convert("RGB"))
                pictures.append((candidate_regions(rgb), r.data["regions"]))

    def figures(need: dict[str, float]) -> tuple[float, float]:
        ms = [match([(g.type, g.box) for g in select(c, need)], truth) for c, truth in pictures]
        return float(np.mean([m["miou"] for m in ms])), float(np.mean([m["type_acc"] for m in ms]))

    need = {t: REGION_EVIDENCE.get(t, 1.0) for t in TYPES}
    start = figures(need)
    for _ in range(ROUNDS):
        for t in TYPES:
            need[t] = max(BARS, key=lambda b: sum(figures({**need, t: b})))
    end = figures(need)
    out = {"seeds": args.seeds, "pictures": len(pictures), "bars": need,
           "before": {"box_miou": round(start[0], 4), "type_accuracy": round(start[1], 4)},
           "after": {"box_miou": round(end[0], 4), "type_accuracy": round(end[1], 4)}}
    print(json.dumps(out, indent=None if not args.json else 1))


if __name__ == "__main__":
    main()

"""GIQA with the assess_quality tool alone: box mIoU and type accuracy on the generated set's descriptions, and
the tool's own answers to the region questions, against a baseline that always says "no" / "A" (chance).

    python benchmarks/giqa.py [--seed 0] [--limit N] [--photos FOLDER] [--json]

The tool answers a question the way an agent reading its JSON would: yes when it reports the asked type inside
the asked box; the worse region is the one its regions cover more (severity x area); the kind is the type
covering the box most. Also per type: precision and recall of the regions said (IoU >= HIT with a true region
of the type), and the scenes alone. Each figure with its 95 % interval (evals/intervals.mean_figure). The load
average is printed: figures measured while other work runs say so. Seed 0 is the evaluation split;
benchmarks/giqa_tune.py fits the tool's bars on other seeds. The agent figures (a local model with and without
the tool) come from `toolpath eval giqa --model local:qwen2.5-coder-0.5b --category yes_no` with
TOOLPATH_GIQA_TOOLS unset or `none`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HIT = 0.5  # the IoU at which a said region is the true one, for per-type precision and recall
sys.path.insert(0, str(ROOT))


def per_type(pairs: list[tuple[list, list[dict]]]) -> dict:
    """Precision and recall of each type over (said regions, true regions) pairs: a said region is right
    when a true region of its type overlaps it with IoU >= HIT (each true region counted once)."""
    from toolpath.evals.benchmarks.giqa_scoring import iou
    from toolpath.tools.image.distortion_tiles import TYPES

    said = {k: 0 for k in TYPES}
    true = {k: 0 for k in TYPES}
    hit = {k: 0 for k in TYPES}
    for regions, truth in pairs:
        for t in truth:
            true[t["type"]] += 1
        free = list(truth)
        for r in regions:
            said[r.type] += 1
            match = next((t for t in free if t["type"] == r.type and iou(r.box, t["box"]) >= HIT), None)
            if match is not None:
                free.remove(match)
                hit[r.type] += 1
    return {k: {"precision": round(hit[k] / said[k], 3) if said[k] else None,
                "recall": round(hit[k] / true[k], 3) if true[k] else None, "said": said[k], "true": true[k]}
            for k in TYPES}


def tool_answer(record, assess) -> str:
    from toolpath.evals.benchmarks.giqa_data import LETTERS
    from toolpath.evals.benchmarks.giqa_scoring import boxes_in
    from toolpath.tools.image.distortion_tiles import TYPES
    from toolpath.tools.image.grounded_quality import WORDS

    d = record.data
    q = d["question"]
    found = boxes_in(q)

    def cover(box, kind=None):
        return sum(r.severity * (r.box[2] - r.box[0]) * (r.box[3] - r.box[1]) for r in assess(box).regions
                   if kind is None or r.type == kind)

    if d["task"] == "yes_no":
        kind = next(k for k in TYPES if f" {WORDS[k]} in" in q)
        return "yes" if cover(found[0], kind) > 0 else "no"
    if record.category == "worse":
        return "A" if cover(found[0]) >= cover(found[1]) else "B"
    per = {k: cover(found[0], k) for k in TYPES}
    return LETTERS[TYPES.index(max(per, key=per.get))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--photos", default=None, help="a folder of photos to plant distortions in (besides the scenes)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.photos:
        os.environ["TOOLPATH_GIQA_PHOTOS"] = args.photos
    import numpy as np
    from PIL import Image

    from toolpath.evals.benchmarks.giqa import GIQA
    from toolpath.evals.benchmarks.giqa_scoring import description_of, match, read_regions
    from toolpath.evals.intervals import mean_figure as figure
    from toolpath.tools.image.grounded_quality import assess

    t0 = time.time()
    bench = GIQA()
    records = list(bench.records(args.limit, args.seed))
    pictures: dict[str, np.ndarray] = {}
    miou, types, said_right, by_cat, chance, pairs, scenes = [], [], [], {}, {}, [], []
    for r in records:
        image = pictures.setdefault(r.data["image"], np.asarray(Image.open(r.data["image"]).convert("RGB")))
        if r.category == "des":
            found = assess(image)
            m = match(read_regions(found.as_dict()["description"]), r.data["regions"])
            miou.append(m["miou"])
            types.append(m["type_acc"])
            pairs.append((found.regions, r.data["regions"]))
            if "-scene" in r.id:
                scenes.append(m)
            said_right.append(float(bench.score(r, description_of(r.data["regions"])) == 1.0))
            continue
        answer = tool_answer(r, lambda box, image=image: assess(image, box))
        by_cat.setdefault(r.category, []).append(float(bench.score(r, answer)))
        chance.setdefault(r.category, []).append(float(bench.score(r, "no" if r.category == "yes_no" else "A")))
    out = {"images": len(miou), "box_miou": figure(miou), "type_accuracy": figure(types),
           "scenes": {"images": len(scenes), "box_miou": figure([m["miou"] for m in scenes]),
                      "type_accuracy": figure([m["type_acc"] for m in scenes])},
           "per_type": per_type(pairs),
           "truth_scores_one": figure(said_right),
           "tool": {k: figure(v) for k, v in by_cat.items()},
           "constant_answer": {k: figure(v) for k, v in chance.items()},
           "seconds": round(time.time() - t0, 1), "load_average": [round(v, 2) for v in os.getloadavg()],
           "photos": os.environ.get("TOOLPATH_GIQA_PHOTOS", "")}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{out['images']} images: box mIoU {out['box_miou']['value']} {out['box_miou']['ci']}, "
          f"type accuracy {out['type_accuracy']['value']} {out['type_accuracy']['ci']}")
    sc = out["scenes"]
    print(f"  scenes alone ({sc['images']}): box mIoU {sc['box_miou']['value']}, "
          f"type accuracy {sc['type_accuracy']['value']}")
    for k, v in out["per_type"].items():
        print(f"  {k}: precision {v['precision']} ({v['said']} said), recall {v['recall']} ({v['true']} true)")
    for k, v in out["tool"].items():
        print(f"  {k}: tool {v['value']} {v['ci']} (n={v['n']}), constant answer {out['constant_answer'][k]['value']}")
    print(f"{out['seconds']} s, load average {out['load_average']}")


if __name__ == "__main__":
    main()

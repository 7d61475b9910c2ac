"""GIQA with the assess_quality tool alone: box mIoU and type accuracy on the generated set's descriptions, and
the tool's own answers to the region questions, against a baseline that always says "no" / "A" (chance).

    python benchmarks/giqa.py [--seed 0] [--limit N] [--photos FOLDER] [--json]

The tool answers a question the way an agent reading its JSON would: yes when it reports the asked type inside
the asked box; the worse region is the one its regions cover more (severity x area); the kind is the type
covering the box most. Each figure with its 95 % interval (evals/intervals.bootstrap_ci). The load average is
printed: figures measured while other work runs say so. The agent figures (a local model with and without the
tool) come from `toolpath eval giqa --model local:qwen2.5-coder-1.5b` with TOOLPATH_GIQA_TOOLS unset or `none`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def figure(values: list[float]) -> dict:
    from toolpath.evals.intervals import bootstrap_ci

    if not values:
        return {"value": None, "ci": None, "n": 0}
    low, high = bootstrap_ci(values)
    return {"value": round(sum(values) / len(values), 4), "ci": [round(low, 4), round(high, 4)], "n": len(values)}


def boxes_in(text: str) -> list[list[int]]:
    return [[int(v) for v in m] for m in re.findall(r"\[(\d+), (\d+), (\d+), (\d+)\]", text)]


def tool_answer(record, assess) -> str:
    from toolpath.evals.benchmarks.giqa_data import LETTERS
    from toolpath.tools.image.distortion_tiles import TYPES
    from toolpath.tools.image.grounded_quality import WORDS

    d = record.data
    q = d["question"]
    found = [boxes_in(q)[i] for i in range(len(boxes_in(q)))]

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
    from toolpath.tools.image.grounded_quality import assess

    t0 = time.time()
    bench = GIQA()
    records = list(bench.records(args.limit, args.seed))
    pictures: dict[str, np.ndarray] = {}
    miou, types, said_right, by_cat, chance = [], [], [], {}, {}
    for r in records:
        image = pictures.setdefault(r.data["image"], np.asarray(Image.open(r.data["image"]).convert("RGB")))
        if r.category == "des":
            desc = assess(image).as_dict()["description"]
            m = match(read_regions(desc), r.data["regions"])
            miou.append(m["miou"])
            types.append(m["type_acc"])
            said_right.append(float(bench.score(r, description_of(r.data["regions"])) == 1.0))
            continue
        answer = tool_answer(r, lambda box, image=image: assess(image, box))
        by_cat.setdefault(r.category, []).append(float(bench.score(r, answer)))
        chance.setdefault(r.category, []).append(float(bench.score(r, "no" if r.category == "yes_no" else "A")))
    out = {"images": len(miou), "box_miou": figure(miou), "type_accuracy": figure(types),
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
    for k, v in out["tool"].items():
        print(f"  {k}: tool {v['value']} {v['ci']} (n={v['n']}), constant answer {out['constant_answer'][k]['value']}")
    print(f"{out['seconds']} s, load average {out['load_average']}")


if __name__ == "__main__":
    main()

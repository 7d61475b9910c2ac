"""The VABench scoring case table (tests/data/scoring_cases/vabench.json): case inputs generated here, the
official column from running the authors' evaluation scripts, the toolpath column from our scorer.

    python benchmarks/scoring_cases/vabench_cases.py --official-src DIR [--out PATH] [--seed 0]

DIR holds Embodied-R1's eval/hf_inference_vabench_point.py and eval/hf_inference_vabench_visual_trace.py
(github pickxiguapi/Embodied-R1, commit e599e95); nothing of them is copied here: they are imported from DIR
and each case runs through their `process_sample` as published (reasoning_model=True, visualization on),
with the model and processor replaced by stand-ins whose decoded output is the case's answer. torch,
transformers, accelerate and pandas are stand-in modules (nothing of them is used on the scoring path);
scipy and Pillow are the real ones. Our agents answer on the 0-1000 grid, the official code reads pixels:
its parser's output goes through our grid_to_pixels before the rest of its code runs (the same step our
official mode takes). A None answer is run as an empty reply.

The official result becomes a value as vabench_scoring says: a point record's accuracy_score (0 when the
script drops it), a trace record's 1 - rmse / 1000 (0 without an rmse). Each case's `kind` is the
difference its reply was built to show, kept where the two columns differ; a difference of no known kind
stops the script.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import logging
import math
import random
import sys
import tempfile
import types
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from toolpath.evals.benchmarks.vabench_scoring import grid_to_pixels, score_case  # noqa: E402

OFFICIAL_CODE = ("github pickxiguapi/Embodied-R1, eval/hf_inference_vabench_point.py and "
                 "eval/hf_inference_vabench_visual_trace.py: process_sample (reasoning_model=True, visualization "
                 "on) and the published aggregation; commit e599e95f6699c53d97575616d1b4089d7948b6c5")
SIZES = [(256, 256), (640, 480), (1280, 720), (333, 517), (1279, 721), (97, 1013)]


# ---- case inputs ----------------------------------------------------------------------------------------

def _num(v: float, rng: random.Random) -> str:
    r = rng.random()
    if r < 0.6:
        return str(int(round(v)))
    if r < 0.9:
        return f"{v:.1f}"
    return repr(float(v))


def _pairs(points, rng, sep=", ", open_="[", close="]") -> str:
    return sep.join(f"{open_}{_num(x, rng)}{sep}{_num(y, rng)}{close}" for x, y in points)


THINK = "<think>The target lies right of the robot; I mark it.</think>"


def replies(points, rng, k: int) -> list[tuple[str, str]]:
    """(label, reply) for one list of grid points: the canonical reply and k others drawn from the rest; the
    label names the difference the reply may show ('' none)."""
    body = _pairs(points, rng)
    first = points[0]
    out = [
        ("", f"{THINK}<answer><point>[{body}]</point></answer>"),
        ("", f"<answer><point>[{body}]</point></answer>"),
        ("", f"Looking at the scene, the plate is free. <answer><point>[{body}]</point></answer> Done."),
        ("", f"<answer><point>[{_pairs(points, rng, sep=',')}]</point></answer>"),
        ("trailing comma: the official fallback skips signed numbers", f"<answer><point>[{body},]</point></answer>"),
        ("", f"{THINK}<answer><point>[{body}]</point> <point>[[1, 1]]</point></answer>"),
        ("", f"<think>first guess <point>[[3, 3], [4, 4]]</point></think><answer><point>[{body}]</point></answer>"),
        ("answer over several lines", f"{THINK}\n<answer>\n<point>[{body}]</point>\n</answer>"),
        ("no <answer> tags", f"<point>[{body}]</point>"),
        ("capitalised <Answer>", f"<Answer><point>[{body}]</point></Answer>"),
        ("spaces inside <point>", f"<answer><point> [{body}] </point></answer>"),
        ("points in parentheses", f"<answer><point>[{_pairs(points, rng, open_='(', close=')')}]</point></answer>"),
        ("lone [x, y]", f"<answer><point>[{_num(first[0], rng)}, {_num(first[1], rng)}]</point></answer>"),
        ("extra brackets", f"<answer><point>[[{body}]]</point></answer>"),
        ("unclosed <point>", f"<answer><point>[{body}]</answer>"),
        ("value off the grid", f"<answer><point>[{body}, [1200, {_num(first[1], rng)}]]</point></answer>"),
        ("value off the grid", f"<answer><point>[[-20, {_num(first[1], rng)}], {body}]</point></answer>"),
        ("item of three numbers", f"<answer><point>[{body}, [5, 5, 5]]</point></answer>"),
    ]
    return out[:1] + rng.sample(out[1:], k)


GARBAGE = [None, "", "I cannot tell where the free space is.", "<answer></answer>",
           "<answer><point>[]</point></answer>",
           "<answer><point></point></answer>", '<answer>{"points": [[500, 500]]}</answer>',
           "<answer><point>[['500', '500'], ['510', '510']]</point></answer>",
           "<answer><point>[[NaN, 500], [500, 500]]</point></answer>",
           "<answer><point>[[1e999, 5], [5, 5]]</point></answer>",
           "<answer><point>[[true, false], [0, 0]]</point></answer>", "<answer><point>[[null, null]]</point></answer>",
           "<answer><point>[[500, 500], 3]</point></answer>", "<answer><point>[[500, 500]</point></answer>",
           "<answer><point>[[500, 500], [510, 520]]</point>", "<answer><point>[[500, 500], [510, 520]]</point></answer"
           "></answer>", "<answer><point>[[-5, \"a\"], [500, 500]]</point></answer>",
           "<answer><point>[[500, 500], [510, 520], [520, 540]]</point></answer><answer><point>[[1, 1]]</point>"
           "</answer>", "<answer><point>[[1e3, 1e3], [0.5e3, 0.5e3]]</point></answer>",
           "<answer><point>[[500,\n500]]</point></answer>",
           "<answer><point>[{\"x\": 500, \"y\": 500}]</point></answer>"]
GARBAGE_LABEL = {  # the garbled replies where the modes differ, and why
    "<answer><point>[[true, false], [0, 0]]</point></answer>": "booleans as numbers",
    "<answer><point>[[500, 500], [510, 520]]</point>": "unclosed <answer>",
    "<answer><point>[[500,\n500]]</point></answer>": "answer over several lines",
    "<answer><point>[[500, 500], 3]</point></answer>": "lone number item",
    "<answer><point>[[NaN, 500], [500, 500]]</point></answer>": "NaN item",
    "<answer><point>[[1e999, 5], [5, 5]]</point></answer>": "value off the grid",
    "<answer><point>[[-5, \"a\"], [500, 500]]</point></answer>": "value off the grid",
}


def _grid(p, w, h):
    return (p[0] * 1000 / w, p[1] * 1000 / h)


def point_cases(rng: random.Random) -> list[tuple[dict, str]]:
    out = []
    for w, h in SIZES:
        boxes = [[0, 0, w - 1, h - 1], [w // 3, h // 4, w // 3, h // 2]]  # the whole image; a one-pixel-wide strip
        for _ in range(6):
            x1, y1 = rng.randrange(0, w - 1), rng.randrange(0, h - 1)
            boxes.append([x1, y1, rng.randrange(x1 + 1, w), rng.randrange(y1 + 1, h)])
        for box in boxes:
            x1, y1, x2, y2 = box
            gx1, gy1 = _grid((x1, y1), w, h)
            gx2, gy2 = _grid((x2, y2), w, h)
            inside = [(rng.uniform(gx1, gx2), rng.uniform(gy1, gy2)) for _ in range(rng.randint(2, 5))]
            anywhere = [(rng.uniform(0, 1000), rng.uniform(0, 1000)) for _ in range(rng.randint(1, 4))]
            edges = [(gx1, gy1), (gx2, gy2), (gx1, (gy1 + gy2) / 2), (gx2 + 0.5, gy2), (gx1 - 0.01, gy1)]
            for pts in (inside, inside[:1] + anywhere, edges):
                off = any(not 0 <= v <= 1000 for p in pts for v in p)  # an edge point past a box on the image edge
                for label, reply in replies(pts, rng, 7):
                    label = label or ("value off the grid" if off else "")
                    out.append(({"kind": "point", "width": w, "height": h, "bbox": box, "answer": reply}, label))
        for reply in GARBAGE:
            out.append(({"kind": "point", "width": w, "height": h, "bbox": boxes[-1], "answer": reply},
                        GARBAGE_LABEL.get(reply, "")))
    return out


def trace_cases(rng: random.Random) -> list[tuple[dict, str]]:
    out = []
    for w, h in SIZES:
        for n_gt in (2, 3, 5, 8, 8, 12):
            gt = [[rng.randrange(0, w), rng.randrange(0, h)] for _ in range(n_gt)]
            if rng.random() < 0.3:
                gt = [[x + 0.5, y + 0.25] for x, y in gt]
            exact = [_grid(p, w, h) for p in gt]
            near = [(min(1000, max(0, x + rng.gauss(0, 15))), min(1000, max(0, y + rng.gauss(0, 15))))
                    for x, y in exact]
            eight = [(rng.uniform(0, 1000), rng.uniform(0, 1000)) for _ in range(8)]
            for pts in (exact, near, eight, near[:2], near[:1] + eight[:4]):
                for label, reply in replies(pts, rng, 6):
                    out.append(({"kind": "trace", "width": w, "height": h, "trajectory": gt, "answer": reply},
                                label))
            one = f"<answer><point>[[{_num(near[0][0], rng)}, {_num(near[0][1], rng)}]]</point></answer>"
            out.append(({"kind": "trace", "width": w, "height": h, "trajectory": gt, "answer": one}, ""))
        far_gt = [[w - 1, h - 1], [w - 2, h - 3], [w - 1, h - 2]]
        for reply, label in (("<answer><point>[[0, 0], [0, 1], [1, 0]]</point></answer>", "rmse over 1000"),
                             ("<answer><point>[[0, 0], [300, 300]]</point></answer>", "rmse over 1000"),
                             ("<answer><point>[[500, 500], [900, 900]]</point></answer>", "")):
            out.append(({"kind": "trace", "width": w, "height": h, "trajectory": far_gt, "answer": reply}, label))
        for reply in GARBAGE:
            out.append(({"kind": "trace", "width": w, "height": h, "trajectory": gt, "answer": reply},
                        GARBAGE_LABEL.get(reply, "")))
    return out


# ---- the official run -----------------------------------------------------------------------------------

def _stand_in_modules() -> None:
    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
    module("torch", no_grad=contextlib.nullcontext, device=lambda *a: None)
    module("transformers", Qwen2_5_VLForConditionalGeneration=object, AutoProcessor=object)
    module("accelerate", Accelerator=object)
    module("accelerate.utils", set_seed=lambda *a: None)
    module("accelerate.utils.dataclasses", DistributedType=object)
    module("pandas")


class _Inputs(dict):
    input_ids = [[0]]

    def to(self, device):
        return self


class _Processor:
    reply = ""

    def apply_chat_template(self, messages, **kw):
        return ""

    def __call__(self, **kw):
        return _Inputs()

    def batch_decode(self, ids, **kw):
        return [self.reply]


class _Model:
    def generate(self, **kw):
        return [[0, 1]]


def load_official(src: Path) -> dict:
    _stand_in_modules()
    mods = {}
    for kind, file in (("point", "hf_inference_vabench_point.py"), ("trace", "hf_inference_vabench_visual_trace.py")):
        spec = importlib.util.spec_from_file_location(f"official_vabench_{kind}", src / file)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.logger = logging.getLogger(f"official_vabench_{kind}")
        mod.logger.disabled = True  # it logs every dropped record; the table says which
        mods[kind] = mod
    return mods


def run_official(mods: dict, case: dict, vis_dir: str, images: dict) -> tuple[float, dict]:
    """(value, detail) of one case from the official process_sample."""
    w, h, kind = case["width"], case["height"], case["kind"]
    if (w, h) not in images:
        buf = io.BytesIO()
        Image.new("RGB", (w, h), (90, 120, 150)).save(buf, format="PNG")
        images[(w, h)] = buf.getvalue()
    mod = mods[kind]
    parse = mod.__dict__.setdefault("_published_parse", mod.parse_points_from_output)
    mod.parse_points_from_output = lambda output: grid_to_pixels(parse(output), w, h)
    tag = "fsd_free_point" if kind == "point" else "fsd_visual_trace"
    truth = {"bbox": case["bbox"]} if kind == "point" else {"trajectory": case["trajectory"]}
    sample = {"id": "case", "problem": "<image> Your task instruction: put the cup on the plate.",
              "answer": f"<type>{tag}</type>" + json.dumps(truth), "images": [images[(w, h)]]}
    processor = _Processor()
    processor.reply = case["answer"] if isinstance(case["answer"], str) else ""
    res = mod.process_sample(sample, _Model(), processor, None, True, "", {}, vis_dir, False)
    if kind == "point":
        if res is None:
            return 0.0, {"dropped": True, "weight": 0}
        return float(res["accuracy_score"]), {"points_in": res["points_in_bbox"], "points": res["total_points"],
                                              "weight": res["total_points"]}
    if res is None:
        return 0.0, {"dropped": True, "weight": 0}
    if res["rmse"] is None or not math.isfinite(res["rmse"]):
        return 0.0, {"rmse": None if res["rmse"] is None else repr(float(res["rmse"])), "weight": 0}
    return 1.0 - float(res["rmse"]) / 1000, {"rmse": float(res["rmse"]), "mae": float(res["mae"]), "weight": 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--official-src", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=ROOT / "tests/data/scoring_cases/vabench.json")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    mods, images = load_official(args.official_src), {}
    rows, unexplained = [], []
    with tempfile.TemporaryDirectory() as vis_dir:
        for n, (case, label) in enumerate(point_cases(rng) + trace_cases(rng)):
            case = {"id": f"{case['kind']}-{n:04d}", **case}
            official, detail = run_official(mods, case, vis_dir, images)
            toolpath = score_case(case, "toolpath")
            same = abs(official - toolpath) <= 1e-9
            if not same and not label:
                unexplained.append((case, official, toolpath))
            rows.append({"id": case.pop("id"), "case": case, "official": official, "toolpath": toolpath,
                         "kind": "" if same else label, "official_detail": detail})
    table = {"benchmark": "vabench", "official_code": OFFICIAL_CODE,
             "scorer": "toolpath.evals.benchmarks.vabench_scoring:score_case", "cases": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({k: v for k, v in table.items() if k != "cases"}, indent=1)[:-2]
    lines = ",\n".join(json.dumps(row) for row in rows)  # one case a line: a diff shows the cases that changed
    args.out.write_text(f'{head},\n "cases": [\n{lines}\n]}}\n')
    print(f"{len(rows)} cases written to {args.out}")
    for case, official, toolpath in unexplained[:20]:
        print(f"UNEXPLAINED official {official} toolpath {toolpath}: {json.dumps(case)[:300]}")
    if unexplained:
        sys.exit(f"{len(unexplained)} differences of no known kind")


if __name__ == "__main__":
    main()

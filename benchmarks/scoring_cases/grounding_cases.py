"""The GUI grounding scoring-case tables: tests/data/scoring_cases/osworld_g.json and screenspot.json.

    python benchmarks/scoring_cases/grounding_cases.py --official-src DIR [--out tests/data/scoring_cases]

Builds the case inputs (boxes, concave polygons, refusal items; points inside, outside, on edges and vertices,
a hair either side of an edge, in [0, 1], negative, off the image; declines, garbled and empty answers; int and
float coordinates), then runs the PUBLISHED scoring code on each to fill the `official` column. Nothing of that
code is here; it is imported from DIR:

  DIR/osworld_g/grounding_eval.py     OSWorld-G's GroundingEval (its `_eval` method, verbatim)
  DIR/seeclick/pretrain/              SeeClick's screenspot_test.py and process_utils.py (njucckevin/SeeClick),
                                      run whole as a script on a data folder written here, with a stand-in
                                      model whose chat() replies with the case's text and stubs for torch,
                                      transformers and peft (the script only loads the model through them)
  DIR/screenspot_pro/eval_screenspot_pro.py
                                      ScreenSpot-Pro's evaluator (eval_sample_positive_gt), imported with stubs for
                                      torch and model_factory

How an answer (JSON {"point": [x, y]} in pixels, {"refused": true}, or anything else) becomes what each
evaluator reads is written out below (`to_osworld_g`, `to_seeclick_reply`, `to_screenspot_pro_response`); it is
the mapping toolpath.evals.grounding_official documents. The `toolpath` column is computed here independently
of the package (exact arithmetic for polygon edges), and both columns are checked against score_case after.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import logging
import math
import os
import random
import re
import runpy
import sys
import tempfile
import types
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIZES_DESKTOP = [[1920, 1080], [2560, 1440], [1280, 720], [3840, 2160], [1366, 768]]
SIZES_SCREENSPOT = [[1170, 2532], [1080, 2400], [1920, 1080], [2560, 1440], [1366, 768], [997, 631]]
SIZES_PRO = [[3840, 2160], [5120, 2880], [2880, 1800], [2560, 1440], [1920, 1080]]
GARBLED = [None, "", "click(5, 5)", "{", '{"point": [1]}', '{"point": ["120", "40"]}', '{"point": [true, 1]}',
           "[640, 360]", '{"refused": "yes"}', '{"point": [NaN, 10]}', "I would click the Save button at (120, 40).",
           '```json\n{"point": [120, 40]}\n```', '{"point": null}', '{"point": [1e400, 5]}', "null", "42"]
REFUSALS = ['{"refused": true}', '{"refused": true, "reason": "no such element on the screen"}']


# ---- our answer, read as the protocol defines it (independent of the package) -----------------------------

def read_answer(answer):
    """(point, refused): point a pair of finite non-bool numbers, as given (ints stay ints)."""
    data = answer
    if isinstance(answer, str):
        try:
            data = json.loads(answer)
        except ValueError:
            return None, False
    if not isinstance(data, dict):
        return None, False
    if data.get("refused") is True:
        return None, True
    p = data.get("point")
    if isinstance(p, list) and len(p) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in p):
        return p, False
    return None, False


def to_osworld_g(answer) -> list:
    """The predicted box OSWorld-G reads: a click [x, y, x, y], a decline [-1]*4, no point [0]*4."""
    point, refused = read_answer(answer)
    if refused:
        return [-1, -1, -1, -1]
    if point is None:
        return [0, 0, 0, 0]
    return [point[0], point[1], point[0], point[1]]


def _positional(v: float) -> str:
    return format(Decimal(repr(float(v))), "f")  # no exponent: SeeClick's number regex reads digits only


def to_seeclick_reply(answer, size) -> str:
    """The reply SeeClick's test parses: the point as fractions of the image, "(fx,fy)"; no coordinates else."""
    point, _ = read_answer(answer)
    if point is None:
        return ""
    return f"({_positional(point[0] / size[0])},{_positional(point[1] / size[1])})"


def to_screenspot_pro_response(answer, size) -> dict:
    point, _ = read_answer(answer)
    return {"point": None if point is None else [point[0] / size[0], point[1] / size[1]],
            "result": "positive", "raw_response": str(answer)}


# ---- the toolpath column: edges included, in pixels ---------------------------------------------------------

def _on_segment_exact(p, a, b) -> bool:
    x, y = (Fraction(v) for v in p)
    ax, ay, bx, by = (Fraction(v) for v in (*a, *b))
    if (bx - ax) * (y - ay) - (by - ay) * (x - ax) != 0:
        return False
    return min(ax, bx) <= x <= max(ax, bx) and min(ay, by) <= y <= max(ay, by)


def toolpath_polygon(p, flat) -> bool:
    pts = list(zip(flat[0::2], flat[1::2]))
    if any(_on_segment_exact(p, pts[i - 1], pts[i]) for i in range(len(pts))):
        return True
    x, y = (Fraction(v) for v in p)
    inside = False
    for i in range(len(pts)):
        (ax, ay), (bx, by) = (Fraction(v) for v in pts[i - 1]), (Fraction(v) for v in pts[i])
        if (by > y) != (ay > y) and x < bx + (y - by) * (ax - bx) / (ay - by):
            inside = not inside
    return inside


def toolpath_box(p, x1, y1, x2, y2) -> bool:
    return min(x1, x2) <= p[0] <= max(x1, x2) and min(y1, y2) <= p[1] <= max(y1, y2)


def toolpath_osworld(case) -> float:
    point, refused = read_answer(case["answer"])
    kind, c = case["box_type"], case["box_coordinates"]
    if kind == "refusal":
        return float(refused)
    if point is None:
        return 0.0
    if kind == "bbox":
        return float(toolpath_box(point, c[0], c[1], c[0] + c[2], c[1] + c[3]))
    return float(toolpath_polygon(point, c))


def toolpath_screenspot(case) -> float:
    point, _ = read_answer(case["answer"])
    if point is None:
        return 0.0
    b = case["bbox"]
    corners = b if case["evaluator"] == "screenspot_pro" else [b[0], b[1], b[0] + b[2], b[1] + b[3]]
    return float(toolpath_box(point, *corners))


# ---- the official column: the published code, run ----------------------------------------------------------

def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def official_osworld_g(src: Path, cases: list[dict]) -> list[float]:
    evaluator = _import(src / "osworld_g" / "grounding_eval.py", "osworld_g_grounding_eval").GroundingEval()
    out = []
    for case in cases:
        kind, coords, size = case["box_type"], case["box_coordinates"], case["image_size"]
        # as OSWorld-G's evaluate() passes an item: a bbox's corner and size, a polygon's points whole
        corner, extent = (coords[:2], coords[2:]) if kind == "bbox" else (coords, size)
        out.append(float(bool(evaluator._eval(to_osworld_g(case["answer"]), kind, extent, corner, size))))
    return out


def _stub(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


def official_seeclick(src: Path, cases: list[dict]) -> list[float]:
    """Runs SeeClick's pretrain/screenspot_test.py on a data folder of these cases; its per-item verdicts in
    order are its `text_correct` list (every case is written as a text item)."""
    from PIL import Image

    replies = {f"case-{k}": to_seeclick_reply(c["answer"], c["img_size"]) for k, c in enumerate(cases)}

    class Model:
        generation_config = None

        def eval(self):
            return self

        def chat(self, tokenizer, query, history=None):
            return replies[re.search(r'"(case-\d+)"', query).group(1)], None

    class Tokenizer:
        def from_list_format(self, parts):
            return parts[1]["text"]

    loader = types.SimpleNamespace(from_pretrained=lambda *a, **k: Model())
    stubs = {"torch": _stub("torch", manual_seed=lambda *a: None),
             "transformers": _stub("transformers", AutoModelForCausalLM=loader,
                                   AutoTokenizer=types.SimpleNamespace(from_pretrained=lambda *a, **k: Tokenizer())),
             "transformers.generation": _stub("transformers.generation", GenerationConfig=types.SimpleNamespace(
                 from_pretrained=lambda *a, **k: None)),
             "peft": _stub("peft", AutoPeftModelForCausalLM=loader)}
    with tempfile.TemporaryDirectory() as tmp:
        imgs, test = Path(tmp, "imgs"), Path(tmp, "test")
        imgs.mkdir(), test.mkdir()
        items = []
        for k, c in enumerate(cases):
            name = f"{c['img_size'][0]}x{c['img_size'][1]}.png"
            if not (imgs / name).exists():
                Image.new("L", tuple(c["img_size"])).save(imgs / name)
            items.append({"img_filename": name, "bbox": c["bbox"], "instruction": f"case-{k}", "data_type": "text",
                          "data_source": "android"})
        (test / "screenspot_mobile.json").write_text(json.dumps(items))
        script = src / "seeclick" / "pretrain" / "screenspot_test.py"
        saved_argv, saved_modules = sys.argv, {n: sys.modules.get(n) for n in [*stubs, "process_utils"]}
        sys.modules.update(stubs)
        sys.path.insert(0, str(script.parent))
        sys.argv = [str(script), "--qwen_path", "qwen", "--lora_path", "Qwen-VL-Chat", "--screenspot_imgs",
                    str(imgs), "--screenspot_test", str(test), "--task", "mobile"]
        logging.disable(logging.CRITICAL)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                state = runpy.run_path(str(script), run_name="__main__")
        finally:
            logging.disable(logging.NOTSET)
            sys.argv = saved_argv
            sys.path.remove(str(script.parent))
            for n, m in saved_modules.items():
                sys.modules.pop(n, None) if m is None else sys.modules.__setitem__(n, m)
    verdicts = state["text_correct"]
    assert len(verdicts) == len(cases), (len(verdicts), len(cases))
    return [float(v) for v in verdicts]


def official_screenspot_pro(src: Path, cases: list[dict]) -> list[float]:
    saved = {n: sys.modules.get(n) for n in ("torch", "model_factory")}
    sys.modules["torch"] = _stub("torch", manual_seed=lambda *a: None)
    sys.modules["model_factory"] = _stub("model_factory", build_model=lambda *a, **k: None)
    try:
        module = _import(src / "screenspot_pro" / "eval_screenspot_pro.py", "eval_screenspot_pro")
    finally:
        for n, m in saved.items():
            sys.modules.pop(n, None) if m is None else sys.modules.__setitem__(n, m)
    out = []
    with contextlib.redirect_stdout(io.StringIO()):  # it prints every click point
        for c in cases:
            sample = {"bbox": c["bbox"], "img_size": c["img_size"]}
            verdict = module.eval_sample_positive_gt(sample, to_screenspot_pro_response(c["answer"], c["img_size"]))
            out.append(float(verdict == "correct"))
    return out


# ---- the case inputs ---------------------------------------------------------------------------------------

def point(x, y) -> str:
    return json.dumps({"point": [x, y]})


def _near(v: float) -> list[float]:
    """v and values a hair either side: half a pixel, a millionth, one float step."""
    return [v, v - 0.5, v + 0.5, v - 1e-6, v + 1e-6, math.nextafter(v, -math.inf), math.nextafter(v, math.inf)]


def box_points(x1, y1, x2, y2, rng: random.Random) -> list[tuple]:
    """Points probing a box: centre, every edge and corner, a hair either side of each, far off, fractions,
    negative, floats inside."""
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    pts = [(cx, cy), (round(cx), round(cy)), (x1, y1), (x2, y2), (x1, y2), (x2, y1)]
    pts += [(x, cy) for x in _near(x1) + _near(x2)] + [(cx, y) for y in _near(y1) + _near(y2)]
    pts += [(x2 + 1, y2 + 1), (x1 - 40, cy), (0, 0), (0.5, 0.5), (1, 1), (-3, -3), (-1, cy), (cx, -1)]
    pts += [(round(rng.uniform(x1, x2), 2), round(rng.uniform(y1, y2), 2)) for _ in range(3)]
    return pts


def osworld_cases(rng: random.Random) -> list[dict]:
    cases = []

    def add(cid, answer, kind, coords, size):
        cases.append({"id": cid, "case": {"answer": answer, "box_type": kind, "box_coordinates": coords,
                                          "image_size": size}})

    boxes = [[10, 10, 50, 20], [0, 0, 120, 40], [1890, 1050, 30, 30], [640.5, 360.25, 99.5, 20.75], [300, 200, 0, 24],
             [300, 200, 24, 0], [700, 400, -60, 30], [-10, -10, 20, 20], [0, 0, 1, 1]]
    for _ in range(12):
        size = rng.choice(SIZES_DESKTOP)
        w, h = rng.randint(8, 300), rng.randint(8, 120)
        boxes.append([rng.randint(0, size[0] - w), rng.randint(0, size[1] - h), w, h])
    for b, box in enumerate(boxes):
        size = SIZES_DESKTOP[b % len(SIZES_DESKTOP)]
        x1, y1, x2, y2 = box[0], box[1], box[0] + box[2], box[1] + box[3]
        for p, (x, y) in enumerate(box_points(x1, y1, x2, y2, rng)):
            add(f"bbox{b}-p{p}", point(x, y), "bbox", box, size)
        for a, answer in enumerate(GARBLED + REFUSALS):
            add(f"bbox{b}-a{a}", answer, "bbox", box, size)
    polygons = {"square": [0, 0, 10, 0, 10, 10, 0, 10],
                "u": [100, 100, 130, 100, 130, 130, 120, 130, 120, 110, 110, 110, 110, 130, 100, 130],
                "l": [200, 200, 260, 200, 260, 220, 220, 220, 220, 280, 200, 280],
                "triangle": [400, 300, 500, 300, 450, 380],
                "diamond": [600, 500, 640, 540, 600, 580, 560, 540],
                "star": [800, 100, 812, 136, 850, 136, 819, 158, 831, 194, 800, 172, 769, 194, 781, 158, 750, 136,
                         788, 136],
                "float": [10.5, 20.25, 90.75, 20.25, 90.75, 60.5, 50.125, 80.0, 10.5, 60.5],
                "clockwise": [0, 0, 0, 50, 50, 50, 50, 0]}
    for name, flat in polygons.items():
        size = [1920, 1080]
        pts = list(zip(flat[0::2], flat[1::2]))
        probes = list(pts)
        for i in range(len(pts)):
            (ax, ay), (bx, by) = pts[i - 1], pts[i]
            probes += [((ax + bx) / 2, (ay + by) / 2), ((3 * ax + bx) / 4, (3 * ay + by) / 4)]
            probes += [((ax + bx) / 2 + dx, (ay + by) / 2 + dy) for dx, dy in ((0.01, 0), (-0.01, 0), (0, 0.01),
                                                                               (0, -0.01))]
        xs, ys = flat[0::2], flat[1::2]
        probes += [(round(rng.uniform(min(xs) - 5, max(xs) + 5), 2), round(rng.uniform(min(ys) - 5, max(ys) + 5), 2))
                   for _ in range(25)]
        probes += [(sum(xs) / len(xs), sum(ys) / len(ys)), (0, 0), (1, 1), (0.5, 0.5), (-1, -1)]
        for p, (x, y) in enumerate(probes):
            add(f"poly-{name}-p{p}", point(x, y), "polygon", flat, size)
        for a, answer in enumerate(GARBLED[:6] + REFUSALS[:1]):
            add(f"poly-{name}-a{a}", answer, "polygon", flat, size)
    for r, size in enumerate(SIZES_DESKTOP):
        for a, answer in enumerate(REFUSALS + GARBLED):
            add(f"refusal{r}-a{a}", answer, "refusal", [-1, -1, -1, -1], size)
        for p, (x, y) in enumerate([(-1, -1), (-0.5, -200), (-5, 3), (3, -5), (0, 0), (0, -1), (640, 360),
                                    (0.5, 0.5), (-1e-9, -1e-9), (size[0] + 5, size[1] + 5)]):
            add(f"refusal{r}-p{p}", point(x, y), "refusal", [], size)
    return cases


def screenspot_cases(rng: random.Random) -> list[dict]:
    cases = []

    def add(cid, evaluator, answer, bbox, size):
        cases.append({"id": cid, "case": {"evaluator": evaluator, "answer": answer, "bbox": bbox, "img_size": size}})

    for evaluator, sizes in (("seeclick", SIZES_SCREENSPOT), ("screenspot_pro", SIZES_PRO)):
        tag = "sc" if evaluator == "seeclick" else "pro"
        boxes = []  # as corners; written in the evaluator's convention below
        for k in range(16):
            size = sizes[k % len(sizes)]
            w, h = rng.randint(6, 400), rng.randint(6, 150)
            boxes.append((size, [rng.randint(0, size[0] - w), rng.randint(0, size[1] - h)], [w, h]))
        boxes += [(sizes[0], [0, 0], [48, 48]), (sizes[1], [sizes[1][0] - 30, sizes[1][1] - 30], [30, 30]),
                  (sizes[2], [333.3, 77.7], [41.9, 19.1]), (sizes[3], [500, 500], [0, 0]),
                  (sizes[4], [100, 100], [0.5, 60])]
        for b, (size, (x, y), (w, h)) in enumerate(boxes):
            bbox = [x, y, w, h] if evaluator == "seeclick" else [x, y, x + w, y + h]
            for p, pt in enumerate(box_points(x, y, x + w, y + h, rng)):
                add(f"{tag}-box{b}-p{p}", evaluator, point(*pt), bbox, size)
            for a, answer in enumerate(GARBLED + REFUSALS):
                add(f"{tag}-box{b}-a{a}", evaluator, answer, bbox, size)
        # a box given back to front: SeeClick's negative size, ScreenSpot-Pro's swapped corners
        size = sizes[0]
        bbox = [300, 200, -60, -30] if evaluator == "seeclick" else [300, 200, 240, 170]
        for p, pt in enumerate([(270, 185), (240, 170), (300, 200), (299, 199), (310, 210)]):
            add(f"{tag}-reversed-p{p}", evaluator, point(*pt), bbox, size)
        # fractions a step apart: the point a hair outside an edge, in every size
        for s, size in enumerate(sizes):
            for k in range(30):
                w, h = rng.randint(6, 300), rng.randint(6, 100)
                x, y = rng.randint(0, size[0] - w), rng.randint(0, size[1] - h)
                bbox = [x, y, w, h] if evaluator == "seeclick" else [x, y, x + w, y + h]
                for p, pt in enumerate([(math.nextafter(x + w, math.inf), y + h / 2),
                                        (math.nextafter(x, -math.inf), y + h / 2),
                                        (x + w / 2, math.nextafter(y + h, math.inf)),
                                        (x + w / 2, y + h + 1e-13), (x + w + 1e-12, y + 1)]):
                    add(f"{tag}-step{s}-{k}-p{p}", evaluator, point(*pt), bbox, size)
    return cases


# ---- the tables ---------------------------------------------------------------------------------------------

def osworld_kind(case: dict, official: float, toolpath: float) -> str:
    if official == toolpath:
        return ""
    point, refused = read_answer(case["answer"])
    kind, coords = case["box_type"], case["box_coordinates"]
    if kind == "refusal":
        return "negative click read as a decline"
    if refused:
        return "decline read as a click at (-1, -1)"
    if point is None:
        return "no point read as a click at (0, 0)"
    if all(0 <= v <= 1 for v in point):
        return "pixel click in [0, 1] read as relative"
    if kind == "bbox" and (coords[2] < 0 or coords[3] < 0):
        return "negative width or height: empty box"
    if kind == "polygon":
        return "half-open ray cast on a polygon edge"
    return "unexplained"


def screenspot_kind(case: dict, official: float, toolpath: float) -> str:
    if official == toolpath:
        return ""
    b = case["bbox"]
    reversed_box = (b[2] < 0 or b[3] < 0) if case["evaluator"] == "seeclick" else (b[2] < b[0] or b[3] < b[1])
    if reversed_box:
        return "box given back to front: empty"
    return "fraction rounding at an edge"


def build(src: Path, seed: int = 0) -> dict[str, dict]:
    rng = random.Random(seed)
    ow = osworld_cases(rng)
    for c, off in zip(ow, official_osworld_g(src, [c["case"] for c in ow])):
        tp = toolpath_osworld(c["case"])
        c.update(official=off, toolpath=tp, kind=osworld_kind(c["case"], off, tp))
    ss = screenspot_cases(rng)
    seeclick = [c for c in ss if c["case"]["evaluator"] == "seeclick"]
    pro = [c for c in ss if c["case"]["evaluator"] == "screenspot_pro"]
    for group, run in ((seeclick, official_seeclick), (pro, official_screenspot_pro)):
        for c, off in zip(group, run(src, [c["case"] for c in group])):
            tp = toolpath_screenspot(c["case"])
            c.update(official=off, toolpath=tp, kind=screenspot_kind(c["case"], off, tp))
    return {
        "osworld_g": {"benchmark": "osworld_g",
                      "official_code": "OSWorld-G GroundingEval._eval (xlang-ai/OSWorld-G evaluation; run from its "
                                       "VLMEvalKit port's copy of the method, verbatim); answer mapped to the "
                                       "predicted box as toolpath.evals.grounding_official documents",
                      "scorer": "toolpath.evals.benchmarks.osworld_g:score_case", "cases": ow},
        "screenspot": {"benchmark": "screenspot",
                       "official_code": "v1/v2 (evaluator 'seeclick'): njucckevin/SeeClick pretrain/screenspot_test.py "
                                        "+ process_utils.pred_2_point @ 0ef37ac4d7aaf37ba7b990e3e3c3ca77e1fb8f93, run "
                                        "as a script; Pro (evaluator 'screenspot_pro'): likaixin2000/"
                                        "ScreenSpot-Pro-GUI-Grounding eval_screenspot_pro.py:eval_sample_positive_gt "
                                        "@ bd8bbbb470fbc4fda2a4fa9ec90bd2572507794e",
                       "scorer": "toolpath.evals.benchmarks.screenspot:score_case", "cases": ss}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--official-src", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "scoring_cases")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in build(args.official_src, args.seed).items():
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(table, indent=None, separators=(",", ":")) + "\n")
        kinds: dict[str, int] = {}
        for c in table["cases"]:
            kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
        print(f"{path}: {len(table['cases'])} cases, {os.path.getsize(path)} bytes, kinds {kinds}")


if __name__ == "__main__":
    main()

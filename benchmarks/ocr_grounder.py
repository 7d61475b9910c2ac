"""The OCR grounder's accuracy on the generated GUI-grounding suite, against two baselines measured in the run.

    python benchmarks/ocr_grounder.py [--n 200] [--seed 0] [--convention absolute] [--json PATH]

Every item of toolpath.evals.benchmarks.gui_grounding goes through the policy exactly as the computer-use
agent would hand it over in grounding mode (the agent's own prompt_messages layout: system prompt, a user
message with the Task line and the screenshot), its reply is parsed with the run's ScaleCUA format, the
point converted back to screen pixels with the same CoordinateSpace the agent uses, and scored with
scorers.grounding (the benchmark's scorer). Baselines, on the same items:
  centre      always the centre of the screen (never declines)
  random-text the centre of a random OCR text line of the screen (seeded; never declines)
Printed: accuracy overall and per category (button, menu, link, text field, icon, refusal), seconds per
item (the first item includes loading the OCR engine), and the ratio of the grounder's accuracy to the
better baseline's.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from toolpath.baselines.ocr_grounder import OCRGrounder, load_image, ocr_lines  # noqa: E402
from toolpath.evals.benchmarks import gui_grounding as G  # noqa: E402
from toolpath.evals.benchmarks.osworld_g import read_records  # noqa: E402
from toolpath.evals.scorers import grounding  # noqa: E402
from toolpath.policies.formats.scalecua import ScaleCUAFormat  # noqa: E402
from toolpath.state import ArtifactRef, Message  # noqa: E402


def messages_for(rec, fmt) -> list[Message]:
    shot = ArtifactRef(sha256="0" * 64, path=rec.data["image"], mime="image/png")
    w, h = rec.data["image_size"]
    return [Message(role="system", content=fmt.space(w, h).describe()),
            Message(role="user", content=f"Task: {rec.data['instruction']}\n"
                                         "Step 1: the current screenshot is attached. " + fmt.shape(),
                    images=[shot])]


def answer_of(resp, fmt, size) -> str:
    """The run's answer, as the agent's act node makes it: a point in image pixels, or a refusal."""
    for call in resp.tool_calls:
        if call.name in ("click", "doubleClick", "rightClick", "moveTo"):
            px, py = fmt.space(*size).to_screen(call.arguments["x"], call.arguments["y"])
            return json.dumps({"point": [px, py]})
        if call.name in ("terminate", "call_user"):
            return json.dumps({"refused": True, "reason": str(call.arguments.get("info", ""))})
    return json.dumps({"refused": True, "reason": "no action"})


def expected(rec) -> dict:
    return {"box_type": rec.data["box_type"], "box_coordinates": rec.data["box_coordinates"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=G.N_SCREENS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--convention", default="absolute", choices=("absolute", "normalized", "grid1000"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--misses", action="store_true", help="print each item the grounder gets wrong")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        records = read_records(G.write_suite(Path(tmp), args.n, args.seed))
        fmt = ScaleCUAFormat(mode="grounding", platform="desktop", convention=args.convention)
        policy = OCRGrounder()
        rng = random.Random(args.seed)
        scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        seconds = []
        for rec in records:
            size = tuple(rec.data["image_size"])
            t0 = time.perf_counter()
            resp = policy.respond(messages_for(rec, fmt), [], format=fmt)
            seconds.append(time.perf_counter() - t0)
            ans = answer_of(resp, fmt, size)
            lines, _ = ocr_lines(rec.data["image"], load_image(rec.data["image"]))  # cached: the grounder read it
            pick = rng.choice(lines)[0] if lines else (0, 0, *size)
            for name, a in (("ocr-grounder", ans),
                            ("centre", json.dumps({"point": [size[0] // 2, size[1] // 2]})),
                            ("random-text",
                             json.dumps({"point": [(pick[0] + pick[2]) // 2, (pick[1] + pick[3]) // 2]}))):
                s = grounding(a, expected(rec), {})
                scores[name][rec.category].append(s)
                if name == "ocr-grounder" and s == 0 and args.misses:
                    print(f"miss {rec.id} {rec.category}: {rec.data['instruction']!r} -> {resp.raw!r} "
                          f"expected {rec.data['box_type']} {rec.data['box_coordinates'][:4]}")
                scores[name]["overall"].append(s)
    cats = sorted(c for c in scores["ocr-grounder"] if c != "overall") + ["overall"]
    print(f"{len(records)} items (seed {args.seed}, {args.convention} coordinates)")
    print(f"{'category':<12}" + "".join(f"{n:>14}" for n in scores) + f"{'n':>6}")
    table = {}
    for c in cats:
        row = {n: sum(v[c]) / len(v[c]) for n, v in scores.items()}
        table[c] = {**row, "n": len(scores["ocr-grounder"][c])}
        print(f"{c:<12}" + "".join(f"{row[n]:>14.1%}" for n in scores) + f"{table[c]['n']:>6}")
    rest = seconds[1:] or seconds
    print(f"seconds per item: mean {sum(rest) / len(rest):.2f}, first (engine load) {seconds[0]:.2f}, "
          f"max {max(seconds):.2f}")
    best_base = max(table["overall"]["centre"], table["overall"]["random-text"])
    ratio = table["overall"]["ocr-grounder"] / best_base if best_base else float("inf")
    print(f"ocr-grounder / best baseline accuracy: {ratio:.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"table": table, "seconds": seconds}, indent=1))


if __name__ == "__main__":
    main()

"""BFCL with a local model, three ways in one run on the same items and weights: through toolpath's react agent
prompted with the model's own chat template and tool format (`model.options.tool_format: native`), through it
with toolpath's JSON grammar (`toolpath`), and through BFCL's own prompt handler for the model's family (the
`bfcl-eval` package's handler code run in-process on the same backend: the anchor, evals/benchmarks/bfcl_handler).

    python benchmarks/bfcl_tool_formats.py [--model local:qwen2.5-coder-0.5b] [--categories simple_python,...]
                                           [--limit 25] [--engine onnxruntime] [--weights int4] [--no-anchor] [--json]

Per category and column: the official score (the package's AST checker), its 95 % interval (bootstrap, as every
eval report), the median seconds per item, native's score over toolpath's, and item by item native against the
handler: both right, only toolpath (native) right, only the handler right, both wrong. One more row, with no
generation of its own, reads the handler's replies with toolpath's native reader instead of the handler's
decoder, which tells a difference of prompt from one of parsing. The same items (the first
`--limit` of each category by the benchmark's seeded pick) go through all three; greedy decoding, and the same
new-token budget per reply (the model spec's max_new_tokens), so a rerun prints the same scores. A model whose
family has no handler in the package gets no anchor column, and the run says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from toolpath.agents.episode import run_episode  # noqa: E402
from toolpath.evals.benchmarks.bfcl import BFCL  # noqa: E402
from toolpath.evals.benchmarks.bfcl_handler import Anchor, AnchorError, score_decoded  # noqa: E402
from toolpath.evals.intervals import bootstrap_ci  # noqa: E402
from toolpath.evals.scoring import score_answer  # noqa: E402
from toolpath.policies.base import load as load_policy  # noqa: E402
from toolpath.policies.formats.native import NATIVE  # noqa: E402
from toolpath.runs import Store  # noqa: E402

FORMATS = ("native", "toolpath")
HANDLER = "handler"
# The handler's own replies read by toolpath's native reader instead of the handler's decoder: no generation of
# its own; it tells a prompt difference (the replies) from a parsing one (how they are read).
READER = "handler_prompt_toolpath_reader"


def task(bench: BFCL, rec, fmt: str, args):
    spec = bench.to_task(rec, model=args.model)
    options = {"tool_format": fmt, **({"engine": args.engine} if args.engine else {}),
               **({"weights": args.weights} if args.weights else {})}
    spec.model.options = {**spec.model.options, **options}
    return spec


def through_toolpath(bench: BFCL, records: list, fmt: str, args, store: Store) -> list[dict]:
    """Each item as an episode of the react agent: its official score, seconds and answer."""
    out = []
    official = bench.scored_as("official")
    for rec in records:
        started = time.perf_counter()
        run = run_episode(task(bench, rec, fmt, args), store)
        seconds = time.perf_counter() - started
        score = score_answer(official, rec, run.answer)
        out.append({"id": rec.id, "right": float(score), "s": seconds, "why": score.explanation,
                    "answer": run.answer})
    return out


def through_handler(anchor: Anchor, records: list) -> tuple[list[dict], list[dict]]:
    """Each item through the package's handler on the same weights: its official score, seconds and reply; and
    the same replies as toolpath's native reader reads them."""
    out, read = [], []
    for rec in records:
        item = {"id": rec.id, **rec.data}
        reply = anchor.respond(item)
        right, why = anchor.score(rec.category, item, reply.text)
        out.append({"id": rec.id, "right": float(right), "s": reply.seconds, "why": why, "answer": reply.text})
        calls = NATIVE.parse(reply.text, id_prefix="anchor").calls
        right, why = score_decoded(rec.category, item, [{c.name: c.arguments} for c in calls])
        read.append({"id": rec.id, "right": float(right), "s": reply.seconds, "why": why, "answer": reply.text})
    return out, read


def row(category: str, column: str, items: list[dict]) -> dict:
    scores = [i["right"] for i in items]
    low, high = bootstrap_ci(scores)
    return {"category": category, "column": column, "n": len(scores), "official": round(sum(scores) / len(scores), 3),
            "interval": [round(low, 3), round(high, 3)],
            "median_s": round(statistics.median(i["s"] for i in items), 2)}


def agreement(ours: list[dict], theirs: list[dict]) -> dict:
    """Item by item: both right, only ours, only the handler's, both wrong."""
    pairs = [(a["right"] > 0, b["right"] > 0) for a, b in zip(ours, theirs)]
    return {"both_right": sum(a and b for a, b in pairs), "only_toolpath": sum(a and not b for a, b in pairs),
            "only_handler": sum(b and not a for a, b in pairs), "both_wrong": sum(not (a or b) for a, b in pairs)}


def make_anchor(bench: BFCL, records: list, args) -> tuple[Anchor | None, str]:
    """The handler anchor over the very policy the native episodes use (the same cached weights)."""
    if args.no_anchor or not records:
        return None, "not asked for"
    try:
        return Anchor(load_policy(task(bench, records[0], "native", args).model)), ""
    except AnchorError as err:
        return None, str(err)


def categories(given: list[str] | None) -> list[str]:
    return [c.strip() for value in given or ["simple_python"] for c in value.split(",") if c.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    ap.add_argument("--categories", "--category", dest="category", action="append",
                    help="BFCL categories, comma-separated or repeated (default: simple_python)")
    ap.add_argument("--limit", type=int, default=25, help="items per category")
    ap.add_argument("--engine", default="onnxruntime")
    ap.add_argument("--weights", default="int4")
    ap.add_argument("--no-anchor", action="store_true", help="leave out BFCL's own handler")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows, details, notes = [], [], []
    with tempfile.TemporaryDirectory() as home:
        store = Store(Path(home))
        for category in categories(args.category):
            bench = BFCL(categories=category)
            records = list(bench.records(limit=args.limit, seed=0))
            results = {fmt: through_toolpath(bench, records, fmt, args, store) for fmt in FORMATS}
            anchor, why_not = make_anchor(bench, records, args)
            if anchor is not None:
                results[HANDLER], results[READER] = through_handler(anchor, records)
            elif why_not not in notes:
                notes.append(why_not)
            made = [row(category, column, items) for column, items in results.items()]
            native, ours = made[0]["official"], made[1]["official"]
            made[0]["native_over_toolpath"] = round(native / ours, 2) if ours else None
            if anchor is not None:
                made[0]["vs_handler"] = agreement(results["native"], results[HANDLER])
                made[1]["vs_handler"] = agreement(results["toolpath"], results[HANDLER])
            rows += made
            details.append({"category": category, "items": results})
            if not args.json:
                for r in made:
                    vs = r.get("vs_handler")
                    agree = "" if vs is None or r["column"] != "native" else (
                        "  vs handler: both {both_right}, only toolpath {only_toolpath}, only handler "
                        "{only_handler}, neither {both_wrong}".format(**vs))
                    print(f"{category:<18} {r['column']:<30} {r['official']:.3f} [{r['interval'][0]:.3f}, "
                          f"{r['interval'][1]:.3f}]  n {r['n']}  median {r['median_s']} s{agree}", flush=True)
        store.close()
    for note in notes:
        print(f"no anchor: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps({"model": args.model, "engine": args.engine, "weights": args.weights,
                          "anchor": HANDLER if not notes else None, "notes": notes, "rows": rows,
                          "items": details}, default=str))


if __name__ == "__main__":
    main()

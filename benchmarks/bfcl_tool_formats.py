"""BFCL through the react agent with a local model, prompted both ways in one run: through its own chat template
and tool format (`model.options.tool_format: native`) and through toolpath's JSON grammar (`toolpath`).

    python benchmarks/bfcl_tool_formats.py [--model local:qwen2.5-coder-0.5b] [--category simple_python ...]
                                           [--limit 25] [--engine onnxruntime] [--weights int4] [--json]

Per category and format: the official score (the package's AST checker), its 95 % interval, the median seconds
per item, and native's score over toolpath's. The same items (the first `--limit` of each category by the
benchmark's seeded pick) go through both formats; greedy decoding, so a rerun prints the same scores.
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
from toolpath.evals.intervals import bootstrap_ci  # noqa: E402
from toolpath.evals.scoring import score_answer  # noqa: E402
from toolpath.runs import Store  # noqa: E402

FORMATS = ("native", "toolpath")


def measure(category: str, fmt: str, args, store: Store) -> dict:
    bench = BFCL(categories=category)
    scores, seconds = [], []
    for rec in bench.records(limit=args.limit, seed=0):
        spec = bench.to_task(rec, model=args.model)
        options = {"tool_format": fmt, **({"engine": args.engine} if args.engine else {}),
                   **({"weights": args.weights} if args.weights else {})}
        spec.model.options = {**spec.model.options, **options}
        started = time.perf_counter()
        run = run_episode(spec, store)
        seconds.append(time.perf_counter() - started)
        scores.append(score_answer(bench, rec, run.answer).scores["official"])
    low, high = bootstrap_ci(scores)
    return {"category": category, "tool_format": fmt, "n": len(scores), "official": sum(scores) / len(scores),
            "interval": [round(low, 3), round(high, 3)], "median_s": round(statistics.median(seconds), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    ap.add_argument("--category", action="append", help="BFCL categories (default: simple_python)")
    ap.add_argument("--limit", type=int, default=25, help="items per category")
    ap.add_argument("--engine", default="onnxruntime")
    ap.add_argument("--weights", default="int4")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as home:
        store = Store(Path(home))
        for category in args.category or ["simple_python"]:
            for fmt in FORMATS:
                rows.append(measure(category, fmt, args, store))
                if not args.json:
                    r = rows[-1]
                    print(f"{category:<22} {fmt:<9} {r['official']:.3f} [{r['interval'][0]:.3f}, "
                          f"{r['interval'][1]:.3f}]  n {r['n']}  median {r['median_s']} s", flush=True)
            native, ours = rows[-2]["official"], rows[-1]["official"]
            rows[-2]["native_over_toolpath"] = round(native / ours, 2) if ours else None
        store.close()
    if args.json:
        print(json.dumps({"model": args.model, "engine": args.engine, "weights": args.weights, "rows": rows}))


if __name__ == "__main__":
    main()

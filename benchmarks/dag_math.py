"""DAG-MATH with a local model: format validity, closeness and the Perfect Reasoning Rate beside plain accuracy.

    python benchmarks/dag_math.py [--model local:qwen2.5-coder-1.5b] [--limit 50] [--seed 0] [--data FILE.jsonl]
                                  [--engine onnxruntime] [--weights int8] [--resume EVAL_ID] [--json]

One eval of the dag_math benchmark (evals/runner.run_eval, in this process; its samples stay in the run store:
`toolpath eval list`, `toolpath runs show RUN`), then each figure over its samples with its 95 % interval
(evals/intervals.bootstrap_ci, seeded):

    accuracy             the boxed answer is right, whatever the graph (the benchmark's score)
    format validity      the reply keeps the format's rules
    closed               valid, and every step but the last used later
    PRR                  closed and right
    closeness            the share of steps used later, over the replies that are lists of steps at all
    accuracy if closed   accuracy over the closed replies; and over the others: does a closed graph go with a
                         right answer?

The machine's load average is printed beside the wall time: a figure measured while other work runs says so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def figures(samples) -> dict:
    from toolpath.evals.intervals import mean_figure as figure

    def metric(key: str, among=lambda s: True) -> list[float]:
        return [s.metrics[key] for s in samples if key in s.metrics and among(s)]

    return {"accuracy": figure([s.score for s in samples]),
            "format validity": figure(metric("valid")),
            "closed": figure(metric("closed")),
            "PRR": figure(metric("prr")),
            "closeness": figure(metric("closeness")),
            "accuracy if closed": figure(metric("correct", lambda s: s.metrics.get("closed") == 1.0)),
            "accuracy if not closed": figure(metric("correct", lambda s: s.metrics.get("closed") == 0.0))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="local:qwen2.5-coder-1.5b")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", help="the official formatted set (JSONL) instead of the generated problems")
    p.add_argument("--engine", help="torch or onnxruntime (default: the model's default)")
    p.add_argument("--weights", choices=("fp32", "bf16", "int8", "int4"))
    p.add_argument("--resume", metavar="EVAL_ID", help="go on with a stored eval: its finished samples are kept")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = p.parse_args(argv)

    from toolpath.evals.runner import run_eval
    from toolpath.runs import open_store

    started = time.perf_counter()
    with open_store() as store:
        result = run_eval("dag_math", store, model=args.model, limit=args.limit, seed=args.seed, data=args.data,
                          engine=args.engine, weights=args.weights, resume=args.resume)
    wall = time.perf_counter() - started
    failed = [s for s in result.samples if s.status != "finished"]
    out = {"eval_id": result.eval_id, "model": args.model, "engine": args.engine, "weights": args.weights,
           "limit": args.limit, "seed": args.seed, "data": args.data, "samples": len(result.samples),
           "not_finished": len(failed), "wall_seconds": round(wall, 1),
           "load_average": [round(x, 2) for x in os.getloadavg()], "figures": figures(result.samples)}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"eval {out['eval_id']}: {args.model}, {out['samples']} problems ({len(failed)} not finished), "
          f"{wall:.0f} s wall, load average {out['load_average'][0]}")
    print(f"{'figure':<24} {'value':>6}  95% CI           n")
    for name, f in out["figures"].items():
        if f["value"] is None:
            print(f"{name:<24} {'–':>6}")
            continue
        print(f"{name:<24} {f['value']:>6.3f}  [{f['ci'][0]:.3f}, {f['ci'][1]:.3f}]  {f['n']:>3}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

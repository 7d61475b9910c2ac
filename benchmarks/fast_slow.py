"""FaSTA*'s fast-slow editing against pure A* and a fixed tool chain, on the same generated edit tasks.

    python benchmarks/fast_slow.py [--tasks 200] [--seed 0] [--k 20] [--alpha 1.0] [--json PATH]

Four modes run every subtask of the same tasks (toolpath.evals.benchmarks.edits, checked by its program):
- fixed:     one fixed tool per stage (the first registered), no search, no quality gates
- ucs:       uniform-cost search over each subtask's tool subgraph (A* with a zero heuristic)
- astar:     A* with the priors-table heuristic (the slow path alone)
- fast_slow: a learned subroutine first, A* on failure; the library starts empty (in a temporary folder) and
             learns over the suite (induction every k successful traces), as a user's would
Cost is the measured seconds of every tool call a subtask made (failed fast attempts included); tool calls
are counted too, since they do not depend on the machine's speed. Induction's own A/B runs are reported on
their own line ("learning"), not in any task's cost. The ratio printed last is fast-slow's cost per task
against pure A*'s, measured in this run, with the success difference in points; A*'s expansions are
compared with uniform-cost search's on the same subgraphs; the learning curve is fast-slow's cost per task
in blocks of the suite, with the library's size at the end of each block.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from toolpath.evals.benchmarks import edits as E  # noqa: E402
from toolpath.planners.executor import FastSlow, fixed_chain, run_chain  # noqa: E402
from toolpath.planners.library import Library  # noqa: E402


def run_mode(name: str, runner, tasks, on_task=None) -> dict:
    per_task = []
    for t in tasks:
        image, runs = run_chain(runner, E.input_image(t), t.subtasks)
        results = E.check(t, image)
        row = {"id": t.id, "steps": t.steps, "ok": all(r.ok for r in results),
               "subtasks_ok": sum(r.ok for r in results), "subtasks": len(results),
               "cost": sum(r.cost for r in runs), "tool_calls": sum(r.tool_calls for r in runs),
               "quality": [r.quality for r in runs if r.ok],
               "expansions": sum(r.search.expansions for r in runs if r.search is not None),
               "searches": sum(r.search is not None for r in runs),
               "fast_hits": sum(r.via == "fast" for r in runs), "fast_tries": sum(r.fast is not None for r in runs)}
        per_task.append(row)
        if on_task:
            on_task(row)
    n, subs = len(per_task), sum(r["subtasks"] for r in per_task)
    qualities = [q for r in per_task for q in r["quality"]]
    return {"mode": name, "tasks": n,
            "success": sum(r["ok"] for r in per_task) / n,
            "subtask_success": sum(r["subtasks_ok"] for r in per_task) / subs,
            "cost_per_task": sum(r["cost"] for r in per_task) / n,
            "tool_calls_per_task": sum(r["tool_calls"] for r in per_task) / n,
            "quality": sum(qualities) / len(qualities) if qualities else 0.0,
            "expansions_per_search": (sum(r["expansions"] for r in per_task)
                                      / max(1, sum(r["searches"] for r in per_task))),
            "searches": sum(r["searches"] for r in per_task),
            "fast_hits": sum(r["fast_hits"] for r in per_task), "fast_tries": sum(r["fast_tries"] for r in per_task),
            "per_task": per_task}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, default=20, help="successful traces between inductions")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--block", type=int, default=20, help="tasks per point of the learning curve")
    ap.add_argument("--json", metavar="PATH", help="also write every number here")
    args = ap.parse_args()

    tasks = E.generate(args.tasks, args.seed)
    print(f"{len(tasks)} tasks (seed {args.seed}), {sum(t.steps for t in tasks)} subtasks; "
          f"alpha {args.alpha}, k {args.k}")
    out = {}
    t0 = time.perf_counter()
    out["fixed"] = run_mode("fixed", fixed_chain, tasks)
    print(f"  fixed done ({time.perf_counter() - t0:.0f} s)", flush=True)
    out["ucs"] = run_mode("ucs", FastSlow(None, alpha=args.alpha, use_fast=False, learn=False, heuristic=False).run,
                          tasks)
    print(f"  ucs done ({time.perf_counter() - t0:.0f} s)", flush=True)
    out["astar"] = run_mode("astar", FastSlow(None, alpha=args.alpha, use_fast=False, learn=False).run, tasks)
    print(f"  astar done ({time.perf_counter() - t0:.0f} s)", flush=True)

    with tempfile.TemporaryDirectory(prefix="toolpath-fast-slow-") as tmp:
        lib = Library(Path(tmp) / "library.json")
        fs = FastSlow(lib, alpha=args.alpha, k=args.k)
        learning = {"seconds": 0.0, "inductions": 0, "accepted": 0, "validations": 0, "cached": 0}
        curve, block = [], []

        def after_task(row):
            # induction runs between tasks, when due, and is timed apart from any task's cost
            t = time.perf_counter()
            report = fs.learn_if_due()
            if report is not None:
                learning["seconds"] += time.perf_counter() - t
                learning["inductions"] += 1
                learning["accepted"] += len(report.accepted)
                learning["validations"] += report.validations
                learning["cached"] += report.cached_hits
            block.append(row)
            if len(block) == args.block:
                curve.append({"tasks": len(curve) * args.block + len(block),
                              "cost_per_task": sum(r["cost"] for r in block) / len(block),
                              "tool_calls_per_task": sum(r["tool_calls"] for r in block) / len(block),
                              "success": sum(r["ok"] for r in block) / len(block),
                              "subroutines": len(lib.subroutines)})
                block.clear()

        out["fast_slow"] = run_mode("fast_slow", fs.run, tasks, on_task=after_task)
        out["fast_slow"]["learning"] = learning
        out["fast_slow"]["curve"] = curve
        out["fast_slow"]["library"] = [{"kind": s.kind, "tools": list(s.tools),
                                        "preconditions": [str(p) for p in s.preconditions], "uses": s.uses,
                                        "successes": s.successes, "cost": s.cost, "quality": s.quality}
                                       for s in lib.subroutines]
    print(f"  fast_slow done ({time.perf_counter() - t0:.0f} s)\n")

    print(f"{'MODE':<10} {'TASK OK':>8} {'SUBTASK OK':>11} {'COST s/TASK':>12} {'CALLS/TASK':>11} {'QUALITY':>8} "
          f"{'EXPANSIONS/SEARCH':>18}")
    for m in ("fixed", "ucs", "astar", "fast_slow"):
        r = out[m]
        exp = f"{r['expansions_per_search']:.2f}" if r["searches"] else "-"
        print(f"{m:<10} {100 * r['success']:>7.1f}% {100 * r['subtask_success']:>10.1f}% {r['cost_per_task']:>12.4f} "
              f"{r['tool_calls_per_task']:>11.2f} {r['quality']:>8.3f} {exp:>18}")
    fsr, ast, ucs = out["fast_slow"], out["astar"], out["ucs"]
    L = fsr["learning"]
    print(f"\nfast path: {fsr['fast_hits']} of {fsr['fast_tries']} subroutine tries passed; "
          f"A* ran {fsr['searches']} times (pure A*: {ast['searches']})")
    print(f"learning: {L['inductions']} inductions, {L['accepted']} subroutines accepted, {L['validations']} A/B runs "
          f"({L['cached']} answered from the cache), {L['seconds']:.2f} s (not in any task's cost)")
    print("\nlearning curve (fast-slow, per block of the suite):")
    print(f"  {'TASKS':>6} {'COST s/TASK':>12} {'CALLS/TASK':>11} {'TASK OK':>8} {'SUBROUTINES':>12}")
    for c in fsr["curve"]:
        print(f"  {c['tasks']:>6} {c['cost_per_task']:>12.4f} {c['tool_calls_per_task']:>11.2f} "
              f"{100 * c['success']:>7.1f}% {c['subroutines']:>12}")
    print("\nlibrary at the end:")
    for s in fsr["library"]:
        print(f"  {s['kind']:<12} {' → '.join(s['tools']):<40} uses {s['uses']:>3}  "
              f"if {' and '.join(s['preconditions']) or 'always'}")
    ratio = fsr["cost_per_task"] / ast["cost_per_task"]
    calls = fsr["tool_calls_per_task"] / ast["tool_calls_per_task"]
    points = 100 * (fsr["success"] - ast["success"])
    exp_ratio = ast["expansions_per_search"] / ucs["expansions_per_search"]
    print(f"\nratio fast-slow / pure A*: cost {ratio:.3f}x, tool calls {calls:.3f}x, task success {points:+.1f} points")
    print(f"ratio A* / uniform-cost: expansions {exp_ratio:.3f}x (same subgraphs, same tasks)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Scripted pick-and-place from ground truth in the tabletop robot sandbox (toolpath/sandboxes/robot_sim.py).

    python benchmarks/robot_pick_place.py [--seeds 50] [--first 0]

Per seed: reset(seed) (the default scene: 2 cubes, 2 plates), then put cube seed % 2 on plate (seed // 2) % 2
with `scripted_pick_place`: open, above the cube at a 15 cm clearance height, down, close (re-grasp up to twice
if the fingers hold nothing), lift, over the plate, down, open, up, home. Success is `is_on(cube, plate)`.
Goal: ≥ 48 of 50.

Baselines in the same run, on the same seeds:
  no clearance  the same script with a 3 cm "clearance height": from home straight down to just above the cube,
              and carried with its bottom ~5 mm above the table, so a plate's rim (1.2 cm) or another object
              on the way is pushed
  no check    the same script without the grasp check (no re-grasp after a missed close)
Printed: successes, seconds per episode (reset included), and the ratio of successes against each baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def episode(box, seed: int, **kw) -> tuple[bool, float, str]:
    from toolpath.sandboxes.robot_sim import scripted_pick_place

    t = time.perf_counter()
    box.reset(seed)
    truth = box.objects_truth()
    cubes = [o["name"] for o in truth if o["kind"] == "cube"]
    plates = [o["name"] for o in truth if o["kind"] == "plate"]
    pick, place = cubes[seed % len(cubes)], plates[(seed // 2) % len(plates)]
    ok, log = scripted_pick_place(box, pick, place, **kw)
    return ok, time.perf_counter() - t, log[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="print every episode's outcome")
    args = ap.parse_args()
    from toolpath.sandboxes.robot_sim import TabletopSandbox

    variants = {"scripted": {}, "no clearance": {"clearance": 0.03}, "no check": {"check_grasp": False}}
    results = {}
    with TabletopSandbox(seed=args.first) as box:
        for name, kw in variants.items():
            wins, secs = 0, []
            for seed in range(args.first, args.first + args.seeds):
                ok, s, why = episode(box, seed, **kw)
                wins += ok
                secs.append(s)
                if args.verbose or (name == "scripted" and not ok):
                    print(f"  {name} seed {seed}: {'ok' if ok else 'FAIL'} ({why})")
            results[name] = (wins, statistics.mean(secs))
            print(f"{name:12s} {wins}/{args.seeds} on the plate, {results[name][1]:.2f} s per episode")
    main_wins = results["scripted"][0]
    for name in ("no clearance", "no check"):
        base = results[name][0]
        ratio = f"{main_wins / base:.2f}x" if base else "inf (baseline 0)"
        print(f"ratio scripted / {name}: {ratio} ({main_wins} vs {base})")
    print("goal: >= 48/50 ->", "met" if main_wins >= round(0.96 * args.seeds) else "NOT met")


if __name__ == "__main__":
    main()

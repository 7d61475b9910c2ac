"""The embodied agent on the tabletop suite: success and time per episode, against a naive-grasp baseline.

    python benchmarks/tabletop.py [--episodes 50] [--seed 0]

Runs the suite (toolpath/evals/benchmarks/tabletop.py: the same episodes for every row, in one process, a
scratch run store) with:
  oracle              FSD answers from the simulator's truth: measures points → 3D → grasp → motion
  detector            FSD answers from colour/shape detection in the camera image
  oracle, naive grasp  the oracle's points, but the gripper closes where the pick point lifts to (2 cm below
                      that surface point, yaw 0) instead of at the top face's centre and orientation that
                      tools/grasp.plan_grasp finds in the point cloud: what the grasp planning is worth
  oracle, no clearance the oracle's points and grasp, but the arm travels at the grasp height instead of over
                      the highest thing between pick and place: what the collision-aware path is worth
Printed per row: success, pick / place point accuracy, trace errors against the ground-truth trace (pixels,
VABench's MAE and RMSE, DTW), seconds per episode; last, the ratio of the oracle's success to each baseline's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def naive_grasp(cloud, pick_xyz, radius: float = 0.035, depth: float = 0.02):
    """The baseline: no top-face search, no yaw: close 2 cm below the lifted pick point."""
    import numpy as np

    from toolpath.tools import grasp as G

    pick = np.asarray(pick_xyz, dtype=float)
    ring = G._near(cloud, pick[:2], radius + 0.05)
    ground = float(np.percentile(ring[:, 2], 5)) if len(ring) else 0.0
    z = max(float(pick[2]) - depth, ground + 0.005)
    return G.Grasp(position=[float(pick[0]), float(pick[1]), z], yaw=0.0, top=float(pick[2]), ground=ground,
                   width=0.0)


def low_travel(cloud, a_xy, b_xy, held: float, width: float = 0.06) -> float:
    """The baseline: travel at the grasp height (the held object's bottom just over the table), blind to what
    stands in the way."""
    return held / 2 + 0.005


def run(model: str, episodes: int, seed: int, store) -> dict:
    from toolpath.evals.runner import run_eval

    t = time.perf_counter()
    res = run_eval("tabletop", store, model=model, limit=episodes, seed=seed)
    secs = [s.seconds for s in res.samples]
    summary = res.summary()
    return {"success": summary["score"], "n": len(res.samples), "metrics": summary.get("metrics", {}),
            "s_per_episode": (time.perf_counter() - t) / max(1, len(res.samples)),
            "median_run_s": statistics.median(secs) if secs else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import toolpath.agents.embodied  # noqa: F401 — its plan node imports plan_grasp when the graph is built
    from toolpath.runs import open_store
    from toolpath.tools import grasp as G

    rows = {}
    with tempfile.TemporaryDirectory() as home, open_store(Path(home)) as store:
        rows["oracle"] = run("oracle", args.episodes, args.seed, store)
        rows["detector"] = run("detector", args.episodes, args.seed, store)
        for name, attr, stand_in in (("oracle, naive grasp", "plan_grasp", naive_grasp),
                                     ("oracle, no clearance", "clearance_height", low_travel)):
            real = getattr(G, attr)
            setattr(G, attr, stand_in)
            try:
                rows[name] = run("oracle", args.episodes, args.seed, store)
            finally:
                setattr(G, attr, real)
    print(f"tabletop suite, {args.episodes} episodes of seed {args.seed}")
    print(f"{'':22} {'success':>8} {'pick':>6} {'place':>6} {'MAE px':>7} {'RMSE px':>8} {'DTW':>7} {'s/episode':>10}")
    for name, r in rows.items():
        m = r["metrics"]
        print(f"{name:22} {r['success']:8.3f} {m.get('pick_hit', 0):6.3f} {m.get('place_hit', 0):6.3f} "
              f"{m.get('trace_mae', 0):7.2f} {m.get('trace_rmse', 0):8.2f} {m.get('trace_dtw', 0):7.1f} "
              f"{r['s_per_episode']:10.2f}")
    for name in ("oracle, naive grasp", "oracle, no clearance"):
        base = rows[name]["success"]
        ratio = f"{rows['oracle']['success'] / base:.2f}x" if base else "inf (baseline 0)"
        print(f"oracle / {name.removeprefix('oracle, ')} success: {ratio}")


if __name__ == "__main__":
    main()

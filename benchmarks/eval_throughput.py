"""Eval throughput with 1, 2 and 4 local workers, and Ray on this machine, on episodes that wait on I/O.

    python benchmarks/eval_throughput.py [--episodes 160] [--latency 0.25] [--no-ray]

Each episode is an `arith` task answered by a scripted policy that waits `latency` seconds per model call
(tests/helpers.py SlowArithPolicy: two calls per episode), the way a remote model server keeps an agent
waiting. Throughput = episodes per second of wall time, the workers' start included. Goal: N workers reach
≥ 0.85·N times one worker's throughput. Printed last: the ratios (N workers / 1 worker, and Ray / the local
pool with the same number of workers).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the scripted policy; worker processes inherit sys.path


def throughput(store, episodes: int, workers: int, executor: str = "local") -> tuple[float, float]:
    from toolpath.evals.runner import run_eval

    t = time.perf_counter()
    res = run_eval("arith", store, model="python:helpers:SlowArithPolicy", limit=episodes, workers=workers,
                   executor=executor)
    wall = time.perf_counter() - t
    assert res.summary()["score"] == 1.0, res.summary()
    return episodes / wall, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=160)
    ap.add_argument("--latency", type=float, default=0.25)
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    os.environ["TOOLPATH_TEST_LATENCY"] = str(args.latency)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from toolpath.runs import open_store

    rows = {}
    with tempfile.TemporaryDirectory() as home, open_store(Path(home)) as store:
        for n in (1, 2, 4):
            rows[f"local, {n} worker{'s' if n > 1 else ''}"] = (n, *throughput(store, args.episodes, n))
        if not args.no_ray:
            try:
                import ray  # noqa: F401
            except ImportError:
                print("ray is not installed: its row is skipped (pip install 'toolpath[cluster]')")
            else:
                rows["ray, 4 workers"] = (4, *throughput(store, args.episodes, 4, "ray"))
    print(f"{args.episodes} episodes, {args.latency:g} s per model call (2 calls per episode)")
    print(f"{'':20} {'episodes/s':>11} {'wall s':>8} {'vs 1 worker':>12} {'goal':>6}")
    one = rows["local, 1 worker"][1]
    for name, (n, rate, wall) in rows.items():
        print(f"{name:20} {rate:11.2f} {wall:8.1f} {rate / one:11.2f}x {0.85 * n:5.2f}x")
    if "ray, 4 workers" in rows:
        print(f"ray / local pool (4 workers): {rows['ray, 4 workers'][1] / rows['local, 4 workers'][1]:.2f}x")


if __name__ == "__main__":
    main()

"""Start-up time of `toolpath --help` and `toolpath tools list` against `python -c "import typer"`, same run.

    python benchmarks/startup.py [--repeats 15] [--json]

Goal: `toolpath --help` ≤ 0.3 s. The baseline is what a typer-based CLI pays before it prints anything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wall(cmd: list[str], repeats: int, env: dict) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env, cwd=ROOT)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", action="store_true", help="print one JSON object (milliseconds and the ratio) instead")
    args = ap.parse_args()
    env = {**os.environ, "TOOLPATH_HOME": tempfile.mkdtemp(prefix="toolpath-startup-")}
    py = sys.executable
    rows = [
        ("python -c pass", [py, "-c", "pass"]),
        ('python -c "import typer"', [py, "-c", "import typer"]),
        ("toolpath --help", [py, "-m", "toolpath.cli", "--help"]),
        ("toolpath tools list", [py, "-m", "toolpath.cli", "tools", "list"]),
        ('python -c "import langgraph.graph"', [py, "-c", "import langgraph.graph"]),
    ]
    results = {}
    for name, cmd in rows:
        results[name] = wall(cmd, args.repeats, env)
        if not args.json:
            print(f"{name:<36} {results[name] * 1000:7.1f} ms (median of {args.repeats})")
    ratio = results["toolpath --help"] / results['python -c "import typer"']
    if args.json:
        print(json.dumps({"ms": {k: round(v * 1000, 1) for k, v in results.items()}, "repeats": args.repeats,
                          "ratio_help_vs_typer": round(ratio, 3)}))
        return
    print(f"ratio toolpath --help / import typer (goal: --help <= 300 ms): {ratio:.2f}")


if __name__ == "__main__":
    main()

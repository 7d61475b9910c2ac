"""Start-up time of `toolpath --help` and `toolpath tools list` against `python -c "import typer"`, same run.

    python benchmarks/startup.py [--repeats 15]

Goal: `toolpath --help` ≤ 0.3 s. The baseline is what a typer-based CLI pays before it prints anything.
"""

from __future__ import annotations

import argparse
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
        print(f"{name:<36} {results[name] * 1000:7.1f} ms (median of {args.repeats})")
    ratio = results["toolpath --help"] / results['python -c "import typer"']
    print(f"ratio toolpath --help / import typer (goal: --help <= 300 ms): {ratio:.2f}")


if __name__ == "__main__":
    main()

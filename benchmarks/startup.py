"""Start-up time of `toolpath --help` and `toolpath tools list` against `python -c "import typer"`, same run.

    python benchmarks/startup.py [--repeats 15] [--json] [--before DIR]

Goals: `toolpath --help` ≤ 100 ms and `toolpath tools list` ≤ 250 ms. The baseline is what a typer-based CLI
pays before it prints anything; on a loaded machine compare the ratios to it, not the milliseconds. Each row
gives the median wall time and the median CPU time (user + system) of the process: CPU time moves less when
other work shares the cores. --before DIR also times the CLI of another copy of the package (for instance
`git archive HEAD~1 toolpath | tar -x -C DIR`), interleaved with this one, so before and after share one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(rows: list[tuple[str, list[str], Path]], repeats: int, env: dict) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds of each command. The rows take turns within every repeat, so a burst of
    load from elsewhere falls on all of them rather than on whichever ran then."""
    wall: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    for _ in range(repeats):
        for name, cmd, cwd in rows:
            c, t = _cpu(), time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env, cwd=cwd)
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(_cpu() - c)
    return {name: {"wall": statistics.median(wall[name]), "cpu": statistics.median(cpu[name])} for name in wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", action="store_true", help="print one JSON object (milliseconds and the ratios) instead")
    ap.add_argument("--before", metavar="DIR", help="a folder holding another toolpath/ package: its CLI is timed "
                                                    "too (rows marked 'before'), in the same run")
    args = ap.parse_args()
    env = {**os.environ, "TOOLPATH_HOME": tempfile.mkdtemp(prefix="toolpath-startup-")}
    py = sys.executable
    cli = [("toolpath --help", ["--help"]), ("toolpath tools list", ["tools", "list"])]
    rows = [("python -c pass", [py, "-c", "pass"], ROOT),
            ('python -c "import typer"', [py, "-c", "import typer"], ROOT)]
    rows += [(name, [py, "-m", "toolpath.cli", *argv], ROOT) for name, argv in cli]
    if args.before:
        before = Path(args.before).resolve()
        if not (before / "toolpath" / "cli").is_dir():
            ap.error(f"--before {args.before}: no toolpath/cli package in that folder")
        # `python -m` looks in its working folder first, ahead of the installed package: run from there.
        rows += [(f"{name} (before)", [py, "-m", "toolpath.cli", *argv], before) for name, argv in cli]
    rows.append(('python -c "import langgraph.graph"', [py, "-c", "import langgraph.graph"], ROOT))
    results = measure(rows, args.repeats, env)
    typer = results['python -c "import typer"']
    ratios = {name: round(r["wall"] / typer["wall"], 3) for name, r in results.items() if name.startswith("toolpath")}
    if args.json:
        print(json.dumps({"ms": {k: round(v["wall"] * 1000, 1) for k, v in results.items()},
                          "cpu_ms": {k: round(v["cpu"] * 1000, 1) for k, v in results.items()},
                          "repeats": args.repeats, "ratio_vs_typer": ratios,
                          "ratio_help_vs_typer": ratios["toolpath --help"]}))
        return
    print(f"{'':<40} {'wall ms':>8} {'cpu ms':>8} {'/ typer':>8}   (medians of {args.repeats})")
    for name, r in results.items():
        ratio = f"{ratios[name]:8.2f}" if name in ratios else ""
        print(f"{name:<40} {r['wall'] * 1000:8.1f} {r['cpu'] * 1000:8.1f} {ratio:>8}")
    print("goals: toolpath --help <= 100 ms, toolpath tools list <= 250 ms")


if __name__ == "__main__":
    main()

"""Python sandbox: kernel start and per-cell round trip, against `subprocess.run([python, "-c", …])`, same run.

    python benchmarks/sandbox.py [--cells 200]

Goals: start ≤ 200 ms, round trip ≤ 5 ms. The baseline is the cheapest way to run code in a fresh process,
with no isolation and no state kept between cells.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=200)
    ap.add_argument("--starts", type=int, default=10)
    args = ap.parse_args()
    from toolpath.sandboxes.process import ProcessSandbox, bwrap_works

    reason = bwrap_works()
    if reason:
        print(f"no bubblewrap sandbox here ({reason}); nothing measured")
        return
    starts = []
    for _ in range(args.starts):
        t = time.perf_counter()
        box = ProcessSandbox().start()
        starts.append(time.perf_counter() - t)
        box.close()
    with ProcessSandbox() as box:
        for _ in range(10):
            box.run("x = 1")
        t = time.perf_counter()
        for i in range(args.cells):
            assert box.run(f"x + {i}").value == str(1 + i)
        cell = (time.perf_counter() - t) / args.cells
    base = []
    for _ in range(args.starts):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "print(1 + 1)"], capture_output=True, check=True)
        base.append(time.perf_counter() - t)
    s, b = statistics.median(starts), statistics.median(base)
    print(f"sandbox start (bwrap + kernel ready)   {s * 1000:7.1f} ms (median of {args.starts}; goal <= 200 ms)")
    print(f"sandbox cell round trip                {cell * 1000:7.2f} ms (mean of {args.cells}; goal <= 5 ms)")
    print(f"subprocess.run([python, '-c', ...])    {b * 1000:7.1f} ms (median of {args.starts}) per cell, no state")
    print(f"ratio sandbox round trip / subprocess.run: {cell / b:.3f}")


if __name__ == "__main__":
    main()

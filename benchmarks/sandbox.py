"""Python sandbox: kernel start, per-cell round trip and kernel restart, against `subprocess.run([python, "-c", …])`,
same run.

    python benchmarks/sandbox.py [--cells 200] [--starts 10]

Goals: start ≤ 200 ms, round trip ≤ 5 ms. A restart is what a cell that kills its kernel costs before the next cell
can run (the sandbox's launcher forks a fresh kernel; the sandbox and its /episode folder stay). The baseline is
the cheapest way to run code in a fresh process, with no isolation and no state kept between cells; where a Docker
engine answers, the Docker sandbox is measured too, against `docker run --rm IMAGE python -c …` (IMAGE:
$TOOLPATH_DOCKER_IMAGE, else one built from this machine's Python by toolpath.sandboxes.docker_image).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(make, starts: int, cells: int) -> tuple[float, float, float]:
    """(median start, mean cell round trip, median restart), in seconds, for sandboxes made by `make()`."""
    times = []
    for _ in range(starts):
        t = time.perf_counter()
        box = make().start()
        times.append(time.perf_counter() - t)
        box.close()
    with make() as box:
        for _ in range(10):
            box.run("x = 1")
        t = time.perf_counter()
        for i in range(cells):
            assert box.run(f"x + {i}").value == str(1 + i)
        cell = (time.perf_counter() - t) / cells
        restarts = []
        for _ in range(starts):
            t = time.perf_counter()
            assert "variables are lost" in box.run("import os; os._exit(3)").notes[-1]
            assert box.run("1").value == "1"
            restarts.append(time.perf_counter() - t)
    return statistics.median(times), cell, statistics.median(restarts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=200)
    ap.add_argument("--starts", type=int, default=10)
    args = ap.parse_args()
    from toolpath.sandboxes.process import ProcessSandbox, bwrap_works, unshare_works

    base = []
    for _ in range(args.starts):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "print(1 + 1)"], capture_output=True, check=True)
        base.append(time.perf_counter() - t)
    b = statistics.median(base)
    print(f"subprocess.run([python, '-c', ...])      {b * 1000:7.1f} ms (median of {args.starts}) per cell, no state")
    for isolation, check in (("bwrap", bwrap_works), ("unshare", unshare_works)):
        reason = check()
        if reason:
            print(f"{isolation}: not available here ({reason}); not measured")
            continue
        s, cell, restart = measure(lambda isolation=isolation: ProcessSandbox(isolation=isolation), args.starts,
                                   args.cells)
        print(f"{isolation:8s} sandbox start (kernel ready)   {s * 1000:7.1f} ms "
              f"(median of {args.starts}; goal <= 200 ms)")
        print(f"{isolation:8s} cell round trip                {cell * 1000:7.2f} ms "
              f"(mean of {args.cells}; goal <= 5 ms)")
        print(f"{isolation:8s} kernel restart (crash + 1 cell) {restart * 1000:6.1f} ms (median of {args.starts})")
        print(f"{isolation:8s} ratio round trip / subprocess.run: {cell / b:.3f}")

    docker_rows(args, b)


def docker_rows(args, base: float) -> None:
    """The Docker sandbox and plain `docker run --rm IMAGE python -c …`, where an engine answers."""
    from toolpath.sandboxes.docker import IMAGE_ENV, DockerSandbox, docker_works

    reason = docker_works()
    if reason:
        print(f"docker: not measured ({reason})")
        return
    import os

    import docker

    from toolpath.sandboxes.docker_image import build_host_python_image

    client = docker.from_env(timeout=120)
    image = os.environ.get(IMAGE_ENV) or build_host_python_image(client)
    client.close()
    runs = []
    for _ in range(args.starts):
        t = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python3", "-c", "print(1 + 1)"],
                       capture_output=True, check=True)
        runs.append(time.perf_counter() - t)
    r = statistics.median(runs)
    s, cell, restart = measure(lambda: DockerSandbox(image=image), args.starts, args.cells)
    print(f"docker run --rm IMAGE python -c ...      {r * 1000:7.1f} ms (median of {args.starts}) per cell, no state")
    print(f"docker   sandbox start (kernel ready)   {s * 1000:7.1f} ms (median of {args.starts})")
    print(f"docker   cell round trip                {cell * 1000:7.2f} ms (mean of {args.cells})")
    print(f"docker   kernel restart (crash + 1 cell) {restart * 1000:6.1f} ms (median of {args.starts})")
    print(f"docker   ratio round trip / docker run: {cell / r:.4f}; / subprocess.run: {cell / base:.3f}")


if __name__ == "__main__":
    main()

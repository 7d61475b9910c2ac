"""Round trip of a trivial tool (calculator "1+1") over MCP against the same call in-process, in one run.

    python benchmarks/mcp.py [--calls 300] [--json]

  A. direct: Tool.call in this process, as an episode's tool node does                               (baseline)
  B. stdio: a spec's mcp_servers path (tools/mcp_client.py: the sync call, the background event loop, the SDK's
     ClientSession) to `toolpath mcp serve --tools calculator` over stdio                            (ratio B/A)
  C. http: the same to `toolpath mcp serve --http 0` (streamable HTTP on 127.0.0.1)                   (ratio C/A)
  D. stdio, the SDK's own async client calling in a loop: what the sync bridge of B adds on top of the SDK
Each server is started once, before its timed calls; the first calls (--warmup) are not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, this file's folder comes first on sys.path, where its own name would hide the `mcp` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

ARGS = {"expression": "1+1"}


def _stats(seconds: list[float]) -> dict:
    ms = sorted(s * 1000 for s in seconds)
    return {"median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms), "p90_ms": ms[int(0.9 * (len(ms) - 1))]}


def _timed(fn, calls: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def direct(calls: int, warmup: int) -> list[float]:
    from toolpath.tools.registry import ToolContext, get_tool

    tool, ctx = get_tool("calculator"), ToolContext()
    return _timed(lambda: tool.call(ARGS, ctx), calls, warmup)


def serve_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "toolpath.cli", "mcp", "serve", "--tools", "calculator", *extra]


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def through_client(server: dict, calls: int, warmup: int) -> list[float]:
    from toolpath.spec import McpServerSpec
    from toolpath.tools.mcp_client import McpServers

    with McpServers([McpServerSpec(**server)]) as tools:
        (tool,) = tools
        return _timed(lambda: tool.call(ARGS), calls, warmup)


def sdk_stdio(calls: int, warmup: int) -> list[float]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    command = serve_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=env())

    async def main() -> list[float]:
        async with stdio_client(params, errlog=sys.stderr) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            for _ in range(warmup):
                await session.call_tool("calculator", ARGS)
            out = []
            for _ in range(calls):
                t = time.perf_counter()
                await session.call_tool("calculator", ARGS)
                out.append(time.perf_counter() - t)
            return out

    return anyio.run(main)


def http_server():
    proc = subprocess.Popen(serve_command("--http", "0"), stderr=subprocess.PIPE, text=True, env=env())
    line = proc.stderr.readline()
    found = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
    if not found:
        proc.kill()
        raise SystemExit(f"the HTTP server did not start: {line}{proc.stderr.read()}")
    return proc, found.group(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300, help="timed calls per setup (default 300)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed calls first (default 20)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args()
    os.environ.setdefault("TOOLPATH_HOME", tempfile.mkdtemp(prefix="toolpath-bench-mcp-"))

    results = {"direct": direct(args.calls, args.warmup)}
    command = serve_command()
    results["stdio"] = through_client({"name": "bench-stdio", "command": command[0], "args": command[1:],
                                       "env": {"PYTHONPATH": env()["PYTHONPATH"],
                                               "TOOLPATH_HOME": os.environ["TOOLPATH_HOME"]}},
                                      args.calls, args.warmup)
    proc, url = http_server()
    try:
        results["http"] = through_client({"name": "bench-http", "url": url}, args.calls, args.warmup)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    results["sdk_stdio"] = sdk_stdio(args.calls, args.warmup)

    stats = {k: _stats(v) for k, v in results.items()}
    base = stats["direct"]["median_ms"]
    for _k, s in stats.items():
        s["ratio_to_direct"] = s["median_ms"] / base
    report = {"calls": args.calls, "warmup": args.warmup, "tool": "calculator", "arguments": ARGS, "results": stats,
              "bridge_ms": stats["stdio"]["median_ms"] - stats["sdk_stdio"]["median_ms"]}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"calculator('1+1'), {args.calls} timed calls each (median / mean / p90 ms, ratio of medians to direct)")
    names = {"direct": "A direct, in-process", "stdio": "B MCP stdio (mcp_servers)", "http": "C MCP http (mcp_servers)",
             "sdk_stdio": "D MCP stdio, SDK async loop"}
    for k, s in stats.items():
        print(f"  {names[k]:<30} {s['median_ms']:8.3f} {s['mean_ms']:8.3f} {s['p90_ms']:8.3f}  "
              f"x{s['ratio_to_direct']:.0f}")
    print(f"  the sync bridge (B - D): {report['bridge_ms']:.3f} ms per call")


if __name__ == "__main__":
    main()

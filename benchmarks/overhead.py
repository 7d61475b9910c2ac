"""Per-step overhead of toolpath's react graph against a hand-written LangGraph graph with the same two nodes.

    python benchmarks/overhead.py [--steps 1000] [--json]

Measured in one run, on the same machine:
  A. bare LangGraph: StateGraph(policy ⇄ tool), trivial nodes, no checkpointer           (the baseline)
  B. toolpath react graph, a policy that always calls a no-op tool, no checkpointer      (ratio B/A, goal ≤ 1.3)
  C. bare LangGraph + LangGraph's stock SqliteSaver (its defaults)                        (for scale)
  E. bare LangGraph + a checkpointer that stores nothing, durability sync: LangGraph's own floor   (for scale)
  D. toolpath react graph + toolpath's store checkpointer (WAL, synchronous=NORMAL),     (goal ≤ 1 ms per node step)
     durability="async" + nodes waiting for the previous commit, i.e. exactly what `toolpath run` does
and the database bytes per step after the run (before and after the finished run's checkpoints are pruned).
One "step" is one policy call plus one tool call: two LangGraph node steps.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def bare_graph(checkpointer=None):
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        n: int
        limit: int
        pending: list
        obs: str

    def policy(s: S) -> dict:
        return {"n": s["n"] + 1, "pending": [{"name": "noop", "arguments": {"i": s["n"]}}]}

    def tool(s: S) -> dict:
        return {"pending": [], "obs": "ok"}

    g = StateGraph(S)
    g.add_node("policy", policy)
    g.add_node("tools", tool)
    g.add_edge(START, "policy")
    g.add_edge("policy", "tools")
    g.add_conditional_edges("tools", lambda s: END if s["n"] >= s["limit"] else "policy")
    return g.compile(checkpointer=checkpointer)


def time_bare(steps: int, checkpointer=None) -> float:
    g = bare_graph(checkpointer)
    cfg = {"recursion_limit": 4 * steps + 10, "configurable": {"thread_id": f"bare-{time.time_ns()}"}}
    t = time.perf_counter()
    kwargs = {"durability": "sync"} if checkpointer is not None else {}
    g.invoke({"n": 0, "limit": steps, "pending": [], "obs": ""}, cfg, **kwargs)
    return (time.perf_counter() - t) / steps


class NoopCaller:
    """A policy that calls the no-op tool with a new argument each turn, then answers."""

    name = "bench"

    def __init__(self, steps: int):
        self.steps = steps
        self.turn = 0

    def respond(self, messages, tools, **gen):
        from toolpath.policies.base import Response
        from toolpath.state import ToolCall

        self.turn += 1
        if self.turn > self.steps:
            return Response(text="done")
        return Response(text="", tool_calls=[ToolCall(id=f"c{self.turn}", name="noop", arguments={"i": self.turn})],
                        tokens_in=1, tokens_out=1)


def time_toolpath(steps: int, home: Path, checkpointed: bool) -> tuple[float, str]:
    from toolpath.agents import react
    from toolpath.agents.episode import _first_messages, _runtime
    from toolpath.runs import open_store
    from toolpath.spec import parse_spec
    from toolpath.state import initial_state
    from toolpath.tools.registry import tool

    @tool(timeout=None, cost=0.0)
    def noop(i: int) -> str:
        """Do nothing."""
        return "ok"

    store = open_store(home)
    spec = parse_spec({"id": "bench", "instruction": "go", "model": "scripted:none", "tools": ["noop"],
                       "limits": {"max_steps": steps + 1, "max_seconds": 1e9}})
    _, rt = _runtime(spec, "", store, NoopCaller(steps), None)
    rt.run_id = rt.ctx.run_id = store.create_run(spec.to_json(), spec.id, "bench", "react")
    rt.record(0, "task", _first_messages(rt, react.SYSTEM_PROMPT), time.time(), 0.0)
    graph = react.AGENT.build(rt, checkpointer=store.checkpointer() if checkpointed else None)
    cfg = {"recursion_limit": 4 * steps + 10, "configurable": {"thread_id": rt.run_id}}
    t = time.perf_counter()
    final = graph.invoke(initial_state(), cfg, **({"durability": "async"} if checkpointed else {}))  # as episode.py
    per_step = (time.perf_counter() - t) / steps
    assert final["status"] == "finished" and final["steps"] == steps + 1, final
    store.close()
    return per_step, rt.run_id


def best_of(fn, repeats: int) -> float:
    return min(fn() for _ in range(repeats))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object (ms per step and the ratios) instead")
    args = ap.parse_args()
    n = args.steps
    tmp = Path(tempfile.mkdtemp(prefix="toolpath-bench-"))
    os.environ["TOOLPATH_HOME"] = str(tmp / "home")

    time_bare(50)
    time_toolpath(50, tmp / "warm", checkpointed=False)  # imports and first-call costs out of the way

    a = best_of(lambda: time_bare(n), args.repeats)
    b = best_of(lambda: time_toolpath(n, tmp / f"b{time.time_ns()}", checkpointed=False)[0], args.repeats)

    from langgraph.checkpoint.sqlite import SqliteSaver

    def stock() -> float:
        with SqliteSaver.from_conn_string(str(tmp / f"stock{time.time_ns()}.db")) as saver:
            return time_bare(n, saver)

    c = best_of(stock, args.repeats)

    from langgraph.checkpoint.memory import InMemorySaver

    class NullSaver(InMemorySaver):
        def put(self, config, checkpoint, metadata, new_versions):
            return {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}

        def put_writes(self, *args, **kwargs):
            pass

    e = best_of(lambda: time_bare(n, NullSaver()), args.repeats)
    d_runs = []
    for r in range(args.repeats):
        home = tmp / f"d{r}"
        per, run_id = time_toolpath(n, home, checkpointed=True)
        d_runs.append((per, home, run_id))
    d, d_home, d_run = min(d_runs)

    import sqlite3

    from toolpath.runs import open_store

    db = d_home / "runs.db"

    def db_bytes() -> int:
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        ck = conn.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(checkpoint)), 0) FROM checkpoints").fetchone()
        conn.close()
        return pages - free, ck

    before, ck_before = db_bytes()
    s = open_store(d_home)
    s.prune_checkpoints(d_run)
    s.close()
    after, ck_after = db_bytes()

    if args.json:
        print(json.dumps({"steps": n, "repeats": args.repeats,
                          "ms_per_step": {k: round(v * 1e3, 3) for k, v in zip("ABCED", (a, b, c, e, d))},
                          "bytes_per_step_running": round(before / n), "bytes_per_step_pruned": round(after / n),
                          "ratio_D_C": round(d / c, 3), "ratio_B_A": round(b / a, 3)}))
        return
    print(f"steps per run: {n} (one step = policy node + tool node), best of {args.repeats}")
    print(f"A bare LangGraph, no checkpointer          {a * 1e3:7.3f} ms/step  {a * 5e2:7.3f} ms/node step")
    print(f"B toolpath react, no checkpointer          {b * 1e3:7.3f} ms/step  {b * 5e2:7.3f} ms/node step")
    print(f"C bare LangGraph + stock SqliteSaver       {c * 1e3:7.3f} ms/step  {c * 5e2:7.3f} ms/node step")
    print(f"E bare LangGraph + no-op checkpointer      {e * 1e3:7.3f} ms/step  {e * 5e2:7.3f} ms/node step")
    print(f"D toolpath react + store checkpointer      {d * 1e3:7.3f} ms/step  {d * 5e2:7.3f} ms/node step")
    print(f"database after {n} steps: {before / n:,.0f} bytes/step while running "
          f"({ck_before[0]} checkpoints, {ck_before[1] / max(ck_before[0], 1):,.0f} bytes each), "
          f"{after / n:,.0f} bytes/step after pruning ({ck_after[0]} checkpoint kept)")
    print(f"ratio D/C (checkpointed, toolpath vs stock SqliteSaver): {d / c:.2f}")
    print(f"ratio B/A (toolpath react vs bare LangGraph, goal <= 1.3): {b / a:.2f}")


if __name__ == "__main__":
    main()

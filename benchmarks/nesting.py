"""What nesting costs: ms per step of an agent run nested in another (a capability call) against the same agent
run directly, with the same scripted steps, in the same process and store.

    python benchmarks/nesting.py [--steps 40] [--repeats 5] [--json]

Two pairs, each the median of --repeats runs:
  react        a ReAct agent making --steps calculator calls, run directly vs as the agent node of an
               `agent: graph` spec (the same nested-run machinery as the capability tools)
  spatial      the visual-program agent on the two room photos (program, answer: 2 steps), run directly vs
               through `spatial_query` from a ReAct caller (its two own steps not counted); both pay for the
               sandbox and the reconstruction
The nested figure is the whole nested call (its run row, its graph, its checkpoints, the accounting) divided by
the nested agent's steps; the ratio is nested / direct.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROOMS = [str(ROOT / "examples" / "assets" / f"room_{i}.jpg") for i in (1, 2)]
QUESTION = "Between image 1 and image 2, which way did the camera turn? A. left B. right C. it did not turn."
PROGRAM = ("```python\ndef program(scene):\n    recon = reconstruct(scene)\n"
           "    return describe_camera_motion(recon, 0, 1)\n```")


def calc_script(n: int) -> list:
    return [{"text": "", "tool_calls": [{"name": "calculator", "arguments": {"expression": f"{i} + 1"}}]}
            for i in range(n)] + [{"text": "", "tool_calls": [{"name": "final_answer", "arguments": {"answer": "ok"}}]}]


def timed(fn) -> float:
    t = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - t
    if result.status != "finished":
        raise SystemExit(f"benchmark run {result.run_id} ended {result.status}: {result.error}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40, help="calculator steps of the react pair")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()

    from toolpath.agents.episode import run_episode
    from toolpath.policies.scripted import ScriptedPolicy
    from toolpath.runs import Store
    from toolpath.spec import parse_spec

    store = Store(tempfile.mkdtemp(prefix="toolpath-nesting-"))
    n = args.steps + 1  # the calculator calls and the final answer
    react = parse_spec({"id": "direct", "instruction": "count", "tools": ["calculator", "final_answer"],
                        "limits": {"max_steps": n + 5}, "model": "scripted:none.yaml"})
    graph = parse_spec({"id": "nested", "instruction": "count", "model": "scripted:none.yaml",
                        "limits": {"max_steps": n + 5},
                        "agent": {"name": "graph", "params": {"nodes": {"count": {"agent": "react"}}}}})
    vp = parse_spec({"id": "vp", "instruction": QUESTION, "inputs": {"images": ROOMS}, "agent": "visual_program",
                     "model": "scripted:none.yaml"})
    caller = parse_spec({"id": "caller", "instruction": "which way?", "inputs": {"images": ROOMS},
                         "tools": ["spatial_query", "final_answer"], "model": "scripted:none.yaml"})
    ask = {"text": "", "tool_calls": [{"name": "spatial_query",
                                       "arguments": {"question": QUESTION, "images": ["image_1", "image_2"]}}]}
    done = {"text": "", "tool_calls": [{"name": "final_answer", "arguments": {"answer": "B"}}]}
    vp_steps = [PROGRAM, '{"answer": "B"}']

    def nested_call_seconds(run) -> float:
        """The spatial_query call's own time: the caller's tool step that ran it."""
        step = next(s for s in store.steps(run.run_id) if s["node"] == "tools")
        return step["seconds"]

    rows = {"react": {"direct": [], "nested": []}, "spatial": {"direct": [], "nested": []}}
    for _ in range(args.repeats):  # interleaved, so drift in the machine's load hits both alike
        rows["react"]["direct"].append(timed(lambda: run_episode(react, store, policy=ScriptedPolicy(calc_script(
            args.steps)))) / n)
        rows["react"]["nested"].append(timed(lambda: run_episode(graph, store, policy=ScriptedPolicy(calc_script(
            args.steps)))) / n)
        rows["spatial"]["direct"].append(timed(lambda: run_episode(vp, store, policy=ScriptedPolicy(vp_steps))) / 2)
        r = run_episode(caller, store, policy=ScriptedPolicy([ask, *vp_steps, done]))
        if r.status != "finished":
            raise SystemExit(f"benchmark run {r.run_id} ended {r.status}: {r.error}")
        rows["spatial"]["nested"].append(nested_call_seconds(r) / 2)
    out = {"steps": {"react": n, "spatial": 2}, "repeats": args.repeats}
    for name, pair in rows.items():
        d, m = statistics.median(pair["direct"]) * 1000, statistics.median(pair["nested"]) * 1000
        out[name] = {"direct_ms_per_step": round(d, 2), "nested_ms_per_step": round(m, 2),
                     "overhead_ms_per_step": round(m - d, 2), "ratio": round(m / d, 3)}
    if args.json:
        print(json.dumps(out))
        return
    print(f"{'pair':<9} {'steps':>5} {'direct ms/step':>15} {'nested ms/step':>15} {'overhead':>9} {'ratio':>6}")
    for name in rows:
        o = out[name]
        print(f"{name:<9} {out['steps'][name]:>5} {o['direct_ms_per_step']:>15.2f} {o['nested_ms_per_step']:>15.2f} "
              f"{o['overhead_ms_per_step']:>9.2f} {o['ratio']:>6.3f}")


if __name__ == "__main__":
    main()

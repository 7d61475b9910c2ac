"""`toolpath runs list` and `toolpath runs show`: what the store holds, step by step."""

from __future__ import annotations

import json

from .common import EXIT_OK, BadInput, echo, echo_json, one_line, store_from_args, when


def cmd_runs_list(args) -> int:
    runs = store_from_args(args, readonly=True).list_runs(limit=args.limit)
    if args.json:
        echo_json([{k: r[k] for k in ("id", "task_id", "model", "agent", "status", "answer", "score", "steps",
                                         "tokens_in", "tokens_out", "seconds", "created")} for r in runs])
        return EXIT_OK
    if not runs:
        echo("no runs yet: try `toolpath run examples/hello.yaml`")
        return EXIT_OK
    echo(f"{'RUN':<24} {'TASK':<20} {'MODEL':<22} {'STATUS':<17} {'STEPS':>5} {'TOKENS':>7} {'SECS':>7}  ANSWER")
    for r in runs:
        echo(f"{r['id']:<24} {one_line(r['task_id'], 20):<20} {one_line(r['model'], 22):<22} {r['status']:<17} "
             f"{r['steps']:>5} {r['tokens_in'] + r['tokens_out']:>7} {r['seconds']:>7.1f}  "
             f"{one_line(r['answer'] or '', 40)}")
    return EXIT_OK


def _lines(text: str, most: int = 12, width: int = 200) -> str:
    """Multi-line text for `runs show`: each line cut to `width`, at most `most` lines, later lines indented."""
    lines = [one_line(line, width) for line in (text or "").splitlines() if line.strip()] or [""]
    if len(lines) > most:
        lines = lines[:most] + [f"… {len(lines) - most} more lines (runs show --json has them all)"]
    return "\n    ".join(lines)


def _tree_json(store, run: dict) -> dict:
    """A run, its steps and its nested runs (each the same), as `runs show --json` prints them."""
    return {"run": {**run, "spec": json.loads(run["spec"])}, "steps": store.steps(run["id"]),
            "nested": [_tree_json(store, child) for child in store.child_runs(run["id"])]}


def cmd_runs_show(args) -> int:
    store = store_from_args(args, readonly=True)
    run = store.find_run(args.run_id)
    if run is None:
        raise BadInput(f"no run with id {args.run_id!r} in {store.db_path}")
    if getattr(args, "dag", False):
        return _show_dag(store, run, args.json)
    if args.json:
        echo_json(_tree_json(store, run), ensure_ascii=False)
        return EXIT_OK
    echo(f"run {run['id']}  task {run['task_id']}  model {run['model']}  agent {run['agent']}")
    if run.get("parent_id"):
        echo(f"nested in run {run['parent_id']}, step {run['parent_seq']}")
    echo(f"status {run['status']}  steps {run['steps']}  tokens {run['tokens_in']}→{run['tokens_out']}  "
           f"{run['seconds']:.2f} s  created {when(run['created'])}")
    if run["answer"] is not None:
        echo(f"answer: {run['answer']}")
    if run["score"] is not None:
        echo(f"score: {run['score']:g}")
    if run["error"]:
        echo(f"note: {run['error']}")
    _show_steps(store, run["id"], "")
    return EXIT_OK


def _show_dag(store, run: dict, as_json: bool) -> int:
    """`runs show --dag`: the run's tool results as a reasoning graph (evals/dag/runs.py) and its closeness."""
    from ..evals.dag.runs import run_graph

    graph = run_graph(store.steps(run["id"]))
    if as_json:
        echo_json({"run_id": run["id"], **graph.to_json()}, ensure_ascii=False)
    else:
        echo(f"run {run['id']}  task {run['task_id']}  status {run['status']}")
        for line in graph.lines():
            echo(line)
    return EXIT_OK


def _show_steps(store, run_id: str, pad: str) -> None:
    """Each step of the run, and under the step that called it, each nested run's steps, indented (`│ `)."""
    from ..state import StepRecord

    def out(line: str) -> None:
        echo("\n".join(pad + part if part else part for part in line.split("\n")))

    children: dict[int, list[dict]] = {}
    for child in store.child_runs(run_id):
        children.setdefault(child["parent_seq"], []).append(child)
    for s in map(StepRecord.from_row, store.steps(run_id)):
        head = f"\n[{s.seq}] {s.node}  {s.seconds * 1000:.1f} ms"
        if s.tokens_in or s.tokens_out:
            head += f"  tokens {s.tokens_in}→{s.tokens_out}"
        out(head)
        if s.node == "policy" and s.has("raw"):
            out("  output: " + s.raw.replace("\n", "\n          "))
            for issue in s.issues:
                out("  issue: " + one_line(issue, 200))
        if s.error:
            out(f"  error: {s.error}")
        for child in children.pop(s.seq, []):
            _show_nested(store, child, pad)
        for m in s.messages:
            role = m.get("role")
            if role in ("system", "user") and s.node == "task":
                out(f"  {role}: " + m.get("content", "").replace("\n", "\n    "))
            for c in m.get("tool_calls", []):
                out(f"  call {c['name']}({json.dumps(c.get('arguments', {}), ensure_ascii=False)})  id={c['id']}")
            if role == "tool":
                out(f"  observation from {m.get('name')}: " + _lines(m.get("content", "")))
            if role == "assistant" and s.node != "policy":  # a planner's own step (the edit agent's plan, learn)
                out(f"  {s.node}: " + _lines(m.get("content", "")))
            if role == "user" and s.node == "observe":  # the computer-use agent's view of the screen
                out("  screen: " + _lines(m.get("content", "")))
            elif role == "user" and s.node != "task":
                out("  feedback: " + one_line(m.get("content", ""), 200))
            for img in m.get("images", []):
                out(f"  artifact {img.get('name') or ''} {img['path']}")
        for o in s.observations:
            for a in o.get("artifacts", []):
                if not a.get("mime", "").startswith("image/"):
                    out(f"  artifact {a.get('name') or ''} {a['path']}")
    for rest in children.values():  # a nested run of a step that was not recorded (killed mid-step)
        for child in rest:
            _show_nested(store, child, pad)


def _show_nested(store, child: dict, pad: str) -> None:
    echo(f"{pad}  ┌ nested run {child['id']}  agent {child['agent']}  status {child['status']}  "
         f"steps {child['steps']}  tokens {child['tokens_in']}→{child['tokens_out']}  {child['seconds']:.2f} s")
    if child["answer"] is not None:
        echo(f"{pad}  │ answer: {one_line(child['answer'], 160)}")
    if child["error"]:
        echo(f"{pad}  │ note: {one_line(child['error'], 160)}")
    _show_steps(store, child["id"], pad + "  │ ")
    echo(f"{pad}  └ end of nested run {child['id']}")

"""`toolpath`: run | resume | runs | tools | models | eval.

Exit codes: 0 the agent finished, 1 it failed or ran out of budget, 2 bad input (spec, arguments, ids).
Only argparse and the standard library load at start-up; everything else is imported by the command that
needs it, so `toolpath --help` stays fast.

Text a model made or the store holds is untrusted: every line printed goes through `printable`, which hides
secrets and shows terminal control sequences as escapes instead of sending them to the terminal.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """Raised by a command for input the user must fix; printed without a traceback, exit 2."""


# C0 controls but tab and newline (ESC starts terminal escapes; CR and BS overwrite what was printed), DEL,
# C1 controls (a terminal may read 0x9b as ESC [), and the bidirectional overrides and isolates that make
# text display in an order other than the one it has.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(ch: str) -> str:
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def printable(text: Any) -> str:
    """`text` safe to print on a terminal: known secrets redacted (toolpath.redact), control characters and
    bidi overrides shown as visible escapes (ESC as \\x1b). Newlines and tabs are kept."""
    from .redact import redact

    return _UNPRINTABLE.sub(lambda m: _escape(m.group()), redact(str(text)))


def _print(text: Any = "", file=None, end: str = "\n", flush: bool = False) -> None:
    print(printable(text), file=file or sys.stdout, end=end, flush=flush)


def _print_json(data: Any, ensure_ascii: bool = True, indent: int | None = None) -> None:
    """One JSON document on stdout, secrets redacted; without ensure_ascii, the characters `printable` escapes
    are written as JSON escapes (\\u009b), which a JSON reader turns back into the same text."""
    from .redact import redact_data

    text = json.dumps(redact_data(data), ensure_ascii=ensure_ascii, indent=indent, default=str)
    print(_UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def _err(msg: str) -> None:
    _print(f"toolpath: {msg}", file=sys.stderr)


def _store(args, readonly: bool = False):
    """The run store; reading commands open it read-only, so they work on a home they cannot write."""
    from .runs import open_store

    return open_store(args.home, readonly=readonly)


def _fmt_tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def _one_line(text: str, n: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


class Progress:
    """Live progress on stderr: one line per policy and tool step, with elapsed time and tokens."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.t0 = time.perf_counter()
        self.tokens = 0
        self.tty = sys.stderr.isatty()  # on a terminal, a model that is thinking shows a line that is replaced

    def __call__(self, ev: dict) -> None:
        if self.quiet:
            return
        el = time.perf_counter() - self.t0
        kind = ev["type"]
        if kind == "thinking":
            if self.tty:
                print(f"  step {ev['step']:>3}  {el:7.1f}s  policy …", end="\r", file=sys.stderr, flush=True)
            return
        if kind == "loading":
            _print(f"loading model {ev['model']} …", file=sys.stderr, flush=True)
            return
        if kind == "start":
            line = f"run {ev['run_id']}  model={ev['model']}  agent={ev['agent']}"
        elif kind == "resume":
            self.tokens = ev.get("tokens", 0)
            line = f"resuming {ev['run_id']} after step {ev['from_step']}"
        elif kind == "policy":
            self.tokens += ev["tokens_in"] + ev["tokens_out"]
            what = ("→ " + ", ".join(ev["calls"])) if ev["calls"] else (
                "answer: " + _one_line(ev["answer"] or "") if ev.get("answer") else _one_line(ev["text"]) or "(empty)")
            if ev["issues"]:
                what += f"  [{len(ev['issues'])} malformed call(s) reported back]"
            line = f"  step {ev['step']:>3}  {el:7.1f}s  policy {ev['seconds']:6.2f}s  tokens {_fmt_tokens(self.tokens):>6}  {what}"
        elif kind == "tool":
            mark = "error: " if ev["error"] else ""
            line = f"  step {ev['step']:>3}  {el:7.1f}s  tool {ev['tool']:<12} {ev['seconds']:6.2f}s  {mark}{_one_line(ev['content'], 60)}"
        elif kind == "error":
            line = f"  error: {ev['error']}"
        else:
            return
        print(printable(line) + ("\x1b[K" if self.tty else ""), file=sys.stderr, flush=True)


def _finish(result, args, score: float | None) -> int:
    out = {"run_id": result.run_id, "status": result.status, "answer": result.answer, "steps": result.steps,
           "tokens": result.tokens, "seconds": round(result.seconds, 3), "score": score}
    if result.error:  # why it failed, or what went wrong in a run that still finished (a failed edit subtask)
        out["error"] = result.error
    if args.json:
        _print_json(out)
    else:
        _print(f"{result.status}: {result.answer if result.answer is not None else '(no answer)'}")
        detail = f"{result.steps} steps, {result.tokens} tokens, {result.seconds:.1f} s"
        if score is not None:
            detail += f", score {score:g}"
        _print(f"run {result.run_id} ({detail})")
        if result.error:
            _print(f"note: {result.error}")
    return EXIT_OK if result.status == "finished" else EXIT_FAILED


def _score_run(store, result, spec) -> float | None:
    from .evals.scorers import SCORERS, score

    if spec.evaluator is not None and spec.evaluator.name not in SCORERS:
        # WebArena, MiniWoB++: scored from the world's final state by their benchmark (`toolpath eval`)
        _print(f"note: evaluator {spec.evaluator.name!r} is scored by its benchmark (toolpath eval); "
               "this run is not scored", file=sys.stderr)
        return None
    value = score(spec.evaluator, result.answer)
    if value is not None:
        store.update_run(result.run_id, score=value)
    return value


# ---- commands -----------------------------------------------------------------------------------------

def _known_evaluators() -> dict[str, str]:
    """Evaluator names a spec may use, and who scores each: a scorer of toolpath.evals.scorers, or a benchmark
    that scores the world's final state (`score_final`: WebArena, MiniWoB++, tabletop), named after it."""
    from . import registry
    from .evals.scorers import SCORERS

    known = dict.fromkeys(SCORERS, "scorer")
    for name in registry.names("benchmark"):
        try:
            if registry.load("benchmark", name).scores_final_state:
                known.setdefault(name, "benchmark")
        except registry.RegistryError:  # a benchmark whose optional packages are missing scores nothing here
            continue
    return known


def _check_evaluator(spec, source: str) -> None:
    """An evaluator no scorer or benchmark knows is a typo: refuse it before the run, not after it."""
    from .evals.scorers import SCORERS
    from .spec import SpecError

    name = spec.evaluator.name if spec.evaluator is not None else None
    if name is None or name in SCORERS:
        return
    known = _known_evaluators()
    if name not in known:
        raise BadInput(str(SpecError(source, [("evaluator.name", f"unknown evaluator {name!r}; expected one of "
                                                                  f"{', '.join(sorted(known))}")])))


def cmd_run(args) -> int:
    from pydantic import ValidationError

    from .agents.episode import EpisodeError, run_episode
    from .spec import SpecError, TaskSpec, load_spec, resolve_model_path

    overridden = f"{args.task} (with command-line overrides)"
    try:
        spec = load_spec(args.task)
        # Only what the file set, plus the overrides: defaults an agent or format fills in (DeepEyesV2's 9
        # turns, visual_program's sandbox) must stay unset here, or they would look chosen by the user.
        data = spec.model_dump(exclude_unset=True)
        if args.model is not None:
            data["model"] = {**data.get("model", {}), "name": args.model}
        if args.agent is not None:
            data["agent"] = {**data.get("agent", {}), "name": args.agent}
        if args.max_steps is not None:
            data.setdefault("limits", {})["max_steps"] = args.max_steps
        spec = TaskSpec.model_validate(data)
        problem = resolve_model_path(spec, Path.cwd()) if args.model is not None else None
        if problem is not None:
            raise SpecError(overridden, [("model.name", problem)])
    except SpecError as err:
        raise BadInput(str(err)) from None
    except ValidationError as err:
        from .spec import describe_errors

        raise BadInput(str(SpecError(overridden, describe_errors(err)))) from None
    _check_evaluator(spec, args.task)
    store = _store(args)
    try:
        result = run_episode(spec, store, on_event=Progress(quiet=args.quiet))
    except EpisodeError as err:
        raise BadInput(f"{args.task}: {err}") from None
    return _finish(result, args, _score_run(store, result, spec))


def cmd_resume(args) -> int:
    from .agents.episode import EpisodeError, resume_episode
    from .spec import TaskSpec

    store = _store(args)
    try:
        result = resume_episode(args.run_id, store, on_event=Progress(quiet=args.quiet))
    except EpisodeError as err:
        raise BadInput(str(err)) from None
    spec = TaskSpec.model_validate_json(store.get_run(result.run_id)["spec"])
    return _finish(result, args, _score_run(store, result, spec))


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def cmd_runs_list(args) -> int:
    runs = _store(args, readonly=True).list_runs(limit=args.limit)
    if args.json:
        _print_json([{k: r[k] for k in ("id", "task_id", "model", "agent", "status", "answer", "score", "steps",
                                         "tokens_in", "tokens_out", "seconds", "created")} for r in runs])
        return EXIT_OK
    if not runs:
        _print("no runs yet: try `toolpath run examples/hello.yaml`")
        return EXIT_OK
    _print(f"{'RUN':<24} {'TASK':<20} {'MODEL':<22} {'STATUS':<17} {'STEPS':>5} {'TOKENS':>7} {'SECS':>7}  ANSWER")
    for r in runs:
        _print(f"{r['id']:<24} {_one_line(r['task_id'], 20):<20} {_one_line(r['model'], 22):<22} {r['status']:<17} "
               f"{r['steps']:>5} {r['tokens_in'] + r['tokens_out']:>7} {r['seconds']:>7.1f}  {_one_line(r['answer'] or '', 40)}")
    return EXIT_OK


def _lines(text: str, most: int = 12, width: int = 200) -> str:
    """Multi-line text for `runs show`: each line cut to `width`, at most `most` lines, later lines indented."""
    lines = [_one_line(line, width) for line in (text or "").splitlines() if line.strip()] or [""]
    if len(lines) > most:
        lines = lines[:most] + [f"… {len(lines) - most} more lines (runs show --json has them all)"]
    return "\n    ".join(lines)


def cmd_runs_show(args) -> int:
    store = _store(args, readonly=True)
    run = store.find_run(args.run_id)
    if run is None:
        raise BadInput(f"no run with id {args.run_id!r} in {store.db_path}")
    steps = store.steps(run["id"])
    if args.json:
        run = {**run, "spec": json.loads(run["spec"])}
        _print_json({"run": run, "steps": steps}, ensure_ascii=False)
        return EXIT_OK
    _print(f"run {run['id']}  task {run['task_id']}  model {run['model']}  agent {run['agent']}")
    _print(f"status {run['status']}  steps {run['steps']}  tokens {run['tokens_in']}→{run['tokens_out']}  "
           f"{run['seconds']:.2f} s  created {_when(run['created'])}")
    if run["answer"] is not None:
        _print(f"answer: {run['answer']}")
    if run["score"] is not None:
        _print(f"score: {run['score']:g}")
    if run["error"]:
        _print(f"note: {run['error']}")
    from .state import StepRecord

    for s in map(StepRecord.from_row, steps):
        head = f"\n[{s.seq}] {s.node}  {s.seconds * 1000:.1f} ms"
        if s.tokens_in or s.tokens_out:
            head += f"  tokens {s.tokens_in}→{s.tokens_out}"
        _print(head)
        if s.node == "policy" and s.has("raw"):
            _print("  output: " + s.raw.replace("\n", "\n          "))
            for issue in s.issues:
                _print("  issue: " + _one_line(issue, 200))
        if s.error:
            _print(f"  error: {s.error}")
        for m in s.messages:
            role = m.get("role")
            if role in ("system", "user") and s.node == "task":
                _print(f"  {role}: " + m.get("content", "").replace("\n", "\n    "))
            for c in m.get("tool_calls", []):
                _print(f"  call {c['name']}({json.dumps(c.get('arguments', {}), ensure_ascii=False)})  id={c['id']}")
            if role == "tool":
                _print(f"  observation from {m.get('name')}: " + _lines(m.get("content", "")))
            if role == "assistant" and s.node != "policy":  # a planner's own step (the edit agent's plan, learn)
                _print(f"  {s.node}: " + _lines(m.get("content", "")))
            if role == "user" and s.node == "observe":  # the computer-use agent's view of the screen
                _print("  screen: " + _lines(m.get("content", "")))
            elif role == "user" and s.node != "task":
                _print("  feedback: " + _one_line(m.get("content", ""), 200))
            for img in m.get("images", []):
                _print(f"  artifact {img.get('name') or ''} {img['path']}")
        for o in s.observations:
            for a in o.get("artifacts", []):
                if not a.get("mime", "").startswith("image/"):
                    _print(f"  artifact {a.get('name') or ''} {a['path']}")
    return EXIT_OK


def cmd_tools_list(args) -> int:
    from .tools.registry import load_tools

    tools = load_tools()
    if args.json:
        _print_json([{"name": t.name, "description": t.description, "cost": t.cost, "quality": t.quality,
                      "timeout": t.timeout, "tags": list(t.tags)} for t in tools.values()])
        return EXIT_OK
    _print(f"{'TOOL':<16} {'COST s':>8} {'QUALITY':>8}  DESCRIPTION")
    for t in sorted(tools.values(), key=lambda t: t.name):
        _print(f"{t.name:<16} {t.cost:>8g} {t.quality:>8.2f}  {_one_line(t.description, 80)}")
    return EXIT_OK


def cmd_tools_calibrate(args) -> int:
    """Measure the edit tools on generated sample edits and write the priors table planners read."""
    from .evals.benchmarks.edits import subtask_samples
    from .tools.image.calibrate import calibrate
    from .tools.image.edit_base import edit_tools
    from .tools.image.priors import load_priors, user_table, write_table

    if args.tasks < 1 or args.repeats < 1:
        raise BadInput("--tasks and --repeats must be at least 1")
    samples = subtask_samples(args.tasks, args.seed)
    tools = edit_tools()
    before = load_priors(tools)

    def progress(i, subtask):
        if not args.json and (i % 10 == 0 or i == len(samples) - 1):
            _print(f"  sample {i + 1}/{len(samples)}: {subtask.label}", file=sys.stderr)

    rows = calibrate(samples, repeats=args.repeats, progress=progress)
    path = write_table(rows, Path(args.out).expanduser() if args.out else user_table())
    if args.json:
        _print_json({"table": str(path), "samples": len(samples), "tools": {
            k: {"cost": p.cost, "cost_min": p.cost_min, "quality": p.quality, "n": p.n} for k, p in rows.items()}})
        return EXIT_OK
    _print(f"{'TOOL':<26} {'STAGE':<11} {'COST s':>8} {'MIN s':>8} {'QUALITY':>8} {'N':>5}  (was cost / quality)")
    for name, p in sorted(rows.items(), key=lambda kv: (tools[kv[0]].stage, kv[0])):
        old = before.get(name)
        was = f"{old.cost:.4g} / {old.quality:.2f}" if old else ""
        _print(f"{name:<26} {tools[name].stage:<11} {p.cost:>8.4f} {p.cost_min:>8.4f} {p.quality:>8.2f} {p.n:>5}  ({was})")
    unused = sorted(set(tools) - set(rows))
    for name in unused:
        why = tools[name].available()
        _print(f"{name:<26} {tools[name].stage:<11} not measured: {why or 'no sample of its subtask kinds'}")
    _print(f"wrote {path} ({len(samples)} samples from {args.tasks} generated tasks, seed {args.seed})")
    return EXIT_OK


def _tool(name: str):
    from .tools.registry import ToolError, get_tool

    try:
        return get_tool(name)
    except ToolError as err:
        raise BadInput(str(err)) from None


def cmd_tools_show(args) -> int:
    t = _tool(args.name)
    _print_json({**t.schema(), "cost": t.cost, "quality": t.quality, "timeout": t.timeout}, indent=2)
    return EXIT_OK


def _parse_args(items: list[str], tool) -> dict[str, Any]:
    """KEY=VALUE pairs: a JSON value where it parses (numbers, lists, true), text otherwise; str parameters
    always get the text as typed, so `--arg expression=2` stays the string "2"."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise BadInput(f"--arg {item!r}: expected KEY=VALUE")
        key, raw = (part.strip() if i == 0 else part for i, part in enumerate(item.split("=", 1)))
        field = tool.args_model.model_fields.get(key)
        if field is not None and field.annotation is str:
            out[key] = raw
            continue
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def cmd_tools_call(args) -> int:
    from pathlib import Path

    from .tools.registry import ToolContext, ToolError

    t = _tool(args.name)
    arguments = _parse_args(args.arg or [], t)
    try:
        t.validate(arguments)
    except ToolError as err:
        raise BadInput(str(err)) from None
    store = _store(args)
    inputs = [Path(p).resolve() for p in args.input or []]
    ctx = ToolContext(run_id="cli", inputs=inputs, save_artifact=store.put_artifact)
    try:
        result = t.call(arguments, ctx)
    except ToolError as err:
        _err(str(err))
        return EXIT_FAILED
    if args.json:
        _print_json({"content": result.content, "artifacts": [a.model_dump() for a in result.artifacts]})
    else:
        _print(result.content)
        for a in result.artifacts:
            _print(f"artifact: {a.path}")
    return EXIT_OK


def cmd_models_list(args) -> int:
    from .policies.base import kinds

    rows = kinds()
    if args.json:
        _print_json([r.__dict__ for r in rows])
        return EXIT_OK
    _print(f"{'KIND':<10} {'EXAMPLE':<26} {'HERE':<5} WHY")
    for r in rows:
        _print(f"{r.kind:<10} {r.example:<26} {'yes' if r.available else 'no':<5} {r.reason}")
    return EXIT_OK


def cmd_eval_list(args) -> int:
    store = _store(args, readonly=True)
    rows = store.list_evals(limit=args.limit or 50)
    out = [{"id": r["id"], "benchmark": r["benchmark"], "model": r["model"], "n": r["n"], "done": r["done"],
            "score": (r["summary"] or {}).get("score"), "started": _when(r["created"]),
            "finished": bool(r["finished"])} for r in rows]
    if args.json:
        _print_json(out)
        return EXIT_OK
    _print(f"{'EVAL':<26} {'BENCHMARK':<16} {'MODEL':<20} {'DONE':>9} {'SCORE':>7}  STARTED")
    for r in out:
        score = "" if r["score"] is None else f"{r['score']:.3f}"
        done = f"{r['done']}/{r['n']}" + ("" if r["finished"] else "*")
        _print(f"{r['id']:<26} {r['benchmark']:<16} {_one_line(r['model'], 20):<20} {done:>9} {score:>7}  {r['started']}")
    if any(not r["finished"] for r in out):
        _print("* not finished: toolpath eval BENCHMARK --resume EVAL continues it")
    return EXIT_OK


class EvalProgress:
    """done/total, accuracy so far, rate and ETA on stderr: one redrawn line on a terminal, a line per sample
    otherwise (CI logs), always with the sample's id and outcome."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self.first: int | None = None  # samples already done when this process began (a resumed eval)
        self.scores: list[float] = []

    def __call__(self, i: int, n: int, s) -> None:
        if self.quiet:
            return
        if self.first is None:
            self.first = i - 1
        self.scores.append(s.score)
        elapsed = time.perf_counter() - self.t0
        rate = (i - self.first) / elapsed if elapsed > 0 else 0.0
        eta = (n - i) / rate if rate > 0 else 0.0
        acc = sum(self.scores) / len(self.scores)
        stats = f"acc {acc:.3f}  {rate:.2f}/s  ETA {int(eta) // 60}:{int(eta) % 60:02d}"
        if self.tty:
            width = 24
            fill = round(width * i / n) if n else width
            line = printable(f"[{'#' * fill}{'.' * (width - fill)}] {i}/{n}  {stats}  {s.sample_id[:30]} {s.status}")
            print("\r" + line + "\x1b[K", end="" if i < n else "\n", file=sys.stderr, flush=True)
            return
        mark = "ok " if s.score >= 1 else "   "
        _print(f"  [{i}/{n}] {mark}{s.sample_id:<16} {s.category:<8} {s.status:<17} score {s.score:g}  "
               f"{elapsed:6.1f}s  {stats}  answer: {_one_line(s.answer or s.error or '', 40)}", file=sys.stderr,
               flush=True)


def cmd_eval(args) -> int:
    from . import registry
    from .evals.benchmarks import BenchmarkDataError, UnknownBenchmark
    from .evals.runner import ResumeError, run_eval
    from .spec import ModelSpec

    if args.benchmark == "list":
        return cmd_eval_list(args)
    if args.benchmark not in registry.names("benchmark"):
        raise BadInput(str(UnknownBenchmark(f"unknown benchmark {args.benchmark!r}; available: {', '.join(registry.names('benchmark'))}")))
    if args.model is not None:
        from pydantic import ValidationError

        try:
            ModelSpec(name=args.model)
        except ValidationError as err:
            raise BadInput(f"--model {args.model!r}: {err.errors()[0]['msg'].removeprefix('Value error, ')}") from None
    store = _store(args)
    on_sample = EvalProgress(args.quiet)

    def on_event(ev: dict) -> None:  # per-sample lines come from on_sample; only say when a model loads
        if ev["type"] == "loading" and not args.quiet:
            _print(f"loading model {ev['model']} …", file=sys.stderr, flush=True)

    try:
        result = run_eval(args.benchmark, store, model=args.model, limit=args.limit, seed=args.seed, data=args.data,
                          on_sample=on_sample, on_event=on_event, workers=args.workers, executor=args.executor,
                          resume=args.resume, timeout=args.timeout, retries=args.retries)
    except (BenchmarkDataError, ResumeError) as err:  # missing data (named file and variable), a bad --resume
        raise BadInput(str(err)) from None
    except ValueError as err:  # bad --workers, --timeout, --executor ray without ray
        raise BadInput(str(err)) from None
    summary = result.summary()
    keys = ("eval_id", "benchmark", "n", "score", "by_category", "tokens", "seconds", "overall_excludes", "n_overall",
            "metrics", "cost_usd", "unpriced", "retries", "timed_out")
    if args.json:
        _print_json({k: summary[k] for k in keys if k in summary})
        return EXIT_OK
    names = list(summary.get("metrics", {}))  # the benchmark's own numbers, one column each

    def cells(m: dict) -> str:
        return "".join(f" {m.get(k, float('nan')):>{max(9, len(k))}.3f}" for k in names)

    _print(f"eval {summary['eval_id']}  benchmark {summary['benchmark']}  model {summary['model']}")
    _print(f"{'CATEGORY':<12} {'N':>4} {'SCORE':>7}" + "".join(f" {k:>{max(9, len(k))}}" for k in names))
    for cat, v in summary["by_category"].items():
        _print(f"{cat:<12} {v['n']:>4} {v['score']:>7.3f}" + cells(v.get("metrics", {})))
    n_all = summary.get("n_overall", summary["n"])
    _print(f"{'all':<12} {n_all:>4} {summary['score']:>7.3f}" + cells(summary.get("metrics", {}))
           + f"   tokens {summary['tokens']}  {summary['seconds']:.1f} s" + _cost_text(summary))
    if summary.get("overall_excludes"):
        _print(f"(all leaves out {', '.join(summary['overall_excludes'])}, as {summary['benchmark']} reports it)")
    return EXIT_OK


def _cost_text(summary: dict) -> str:
    out = ""
    if summary.get("cost_usd") is not None:
        out += f"  ${summary['cost_usd']:.4f}" + (f" ({summary['unpriced']} samples not priced)" if summary.get("unpriced") else "")
    elif summary.get("n"):
        out += "  cost: not priced (add the model to prices.json)"
    if summary.get("retries"):
        out += f"  {summary['retries']} model retries"
    if summary.get("timed_out"):
        out += f"  {summary['timed_out']} timed out"
    return out


def cmd_report(args) -> int:
    from .evals.report import write_report

    store = _store(args, readonly=True)
    try:
        out = write_report(store, args.eval_ids, out_dir=args.out, viewer_url=args.viewer_url)
    except ValueError as err:  # an unknown eval id
        raise BadInput(str(err)) from None
    if args.json:
        _print_json(out)
    else:
        for key in ("html", "markdown", "md"):
            if out.get(key):
                _print(out[key])
    return EXIT_OK


def cmd_view(args) -> int:
    from .viewer import serve_forever

    serve_forever(home=_store(args, readonly=True).home, host="127.0.0.1", port=args.port)
    return EXIT_OK


# ---- parser -------------------------------------------------------------------------------------------

def _port(text: str) -> int:
    """A TCP port for argparse: 0 (any free one) to 65535; anything else is a usage error (exit 2)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {port}")
    return port


def _argument_problem(args) -> str | None:
    """What is wrong with the arguments that argparse cannot tell, or None."""
    for opt in ("limit", "max_steps"):
        value = getattr(args, opt, None)
        if value is not None and value <= 0:
            return f"--{opt.replace('_', '-')} must be a positive number, got {value}"
    timeout = getattr(args, "timeout", None)
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        return f"--timeout must be a positive number of seconds, got {timeout}"
    return None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="toolpath", description="Run, resume, inspect and evaluate tool-using agents.")
    p.add_argument("--home", default=os.environ.get("TOOLPATH_HOME"),
                   help="where runs.db and artifacts live (default $TOOLPATH_HOME or ~/.toolpath)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser("run", help="run an agent on a task spec (YAML or JSON)")
    r.add_argument("task", help="path to the task spec")
    r.add_argument("--model", help="override the spec's model, e.g. local, openai:gpt-4.1-mini, scripted:r.yaml")
    r.add_argument("--agent", help="override the spec's agent, e.g. react")
    r.add_argument("--max-steps", type=int, help="override limits.max_steps")
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    r.set_defaults(fn=cmd_run)

    rs = sub.add_parser("resume", help="continue a run that was interrupted, from its last checkpoint")
    rs.add_argument("run_id")
    rs.add_argument("--json", action="store_true")
    rs.add_argument("-q", "--quiet", action="store_true")
    rs.set_defaults(fn=cmd_resume)

    runs = sub.add_parser("runs", help="stored runs").add_subparsers(dest="sub", metavar="SUBCOMMAND", required=True)
    rl = runs.add_parser("list", help="the most recent runs")
    rl.add_argument("--limit", type=int, default=30)
    rl.add_argument("--json", action="store_true")
    rl.set_defaults(fn=cmd_runs_list)
    rsh = runs.add_parser("show", help="every step of one run (id or unique prefix)")
    rsh.add_argument("run_id")
    rsh.add_argument("--json", action="store_true")
    rsh.set_defaults(fn=cmd_runs_show)

    tools = sub.add_parser("tools", help="registered tools").add_subparsers(dest="sub", metavar="SUBCOMMAND", required=True)
    tl = tools.add_parser("list", help="all tools with their cost and quality priors")
    tl.add_argument("--json", action="store_true")
    tl.set_defaults(fn=cmd_tools_list)
    ts = tools.add_parser("show", help="a tool's JSON schema")
    ts.add_argument("name")
    ts.set_defaults(fn=cmd_tools_show)
    tc = tools.add_parser("call", help="call a tool directly")
    tc.add_argument("name")
    tc.add_argument("--arg", action="append", metavar="KEY=VALUE", help="an argument (JSON value or plain text)")
    tc.add_argument("--input", action="append", metavar="PATH", help="a file the call may read (read_file)")
    tc.add_argument("--json", action="store_true")
    tc.set_defaults(fn=cmd_tools_call)
    tk = tools.add_parser("calibrate", help="measure the image-edit tools' cost and quality; write the priors table")
    tk.add_argument("--tasks", type=int, default=40, help="generated edit tasks to sample subtasks from (default 40)")
    tk.add_argument("--seed", type=int, default=1000,
                    help="their seed (default 1000: not the benchmark's 0, so priors are not fitted to it)")
    tk.add_argument("--repeats", type=int, default=1, help="runs per tool and sample (default 1)")
    tk.add_argument("--out", metavar="PATH", help="table to write (default $TOOLPATH_HOME/priors/edit_tools.json)")
    tk.add_argument("--json", action="store_true")
    tk.set_defaults(fn=cmd_tools_calibrate)

    models = sub.add_parser("models", help="policy kinds").add_subparsers(dest="sub", metavar="SUBCOMMAND", required=True)
    ml = models.add_parser("list", help="each policy kind and whether it can run here")
    ml.add_argument("--json", action="store_true")
    ml.set_defaults(fn=cmd_models_list)

    ev = sub.add_parser("eval", help="run a benchmark's records as tasks and score them")
    ev.add_argument("benchmark", help="benchmark name, e.g. arith; or `list` for the stored evals")
    ev.add_argument("--limit", type=int, help="at most N records")
    ev.add_argument("--model", help="the model for every task (default: the benchmark's, else local)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--data", metavar="PATH", help="the benchmark's data (OSWorld-G, ScreenSpot: a JSON file or folder)")
    ev.add_argument("--workers", type=int, default=1, help="episodes at once (local worker processes; default 1)")
    ev.add_argument("--executor", choices=("local", "ray"), default="local",
                    help="local processes (default) or Ray ($RAY_ADDRESS, else a local Ray)")
    ev.add_argument("--resume", metavar="EVAL_ID", help="continue an interrupted eval: its finished samples are kept")
    ev.add_argument("--timeout", type=float, metavar="S", help="time limit per episode, seconds")
    ev.add_argument("--retries", type=int, default=4, help="attempts per model call on transient errors (default 4)")
    ev.add_argument("--json", action="store_true")
    ev.add_argument("-q", "--quiet", action="store_true")
    ev.set_defaults(fn=cmd_eval)
    rp = sub.add_parser("report", help="write an HTML and Markdown report of one or more evals, with plots")
    rp.add_argument("eval_ids", nargs="+", metavar="EVAL_ID", help="eval ids (or unique prefixes); several compare")
    rp.add_argument("--out", metavar="DIR", help="where to write it (default $TOOLPATH_HOME/reports/…)")
    rp.add_argument("--viewer-url", metavar="URL", help="link failures to this trace viewer (toolpath view)")
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(fn=cmd_report)
    vw = sub.add_parser("view", help="serve the trace viewer on 127.0.0.1 (runs, evals, every step)")
    vw.add_argument("--port", type=_port, default=8765, help="port (default 8765; 0 picks a free one)")
    vw.set_defaults(fn=cmd_view)
    return p


def main(argv: list[str] | None = None) -> int:
    from .runs import StoreError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    problem = _argument_problem(args)
    if problem is not None:
        _err(problem)
        return EXIT_BAD_INPUT
    try:
        return args.fn(args)
    except BadInput as err:
        _err(str(err))
        return EXIT_BAD_INPUT
    except StoreError as err:  # TOOLPATH_DB names no reachable PostgreSQL server (the message names it)
        _err(str(err))
        return EXIT_FAILED
    except sqlite3.DatabaseError as err:  # a locked, full or damaged run store: say which file
        from .runs import default_home

        _err(f"run store {Path(args.home) if args.home else default_home()}/runs.db: {err}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        _err("interrupted; `toolpath resume RUN_ID` continues a run from its last checkpoint")
        return 130


if __name__ == "__main__":
    sys.exit(main())

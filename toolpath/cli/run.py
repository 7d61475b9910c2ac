"""`toolpath run` and `toolpath resume`: one episode from a task spec, its progress lines and its score."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .common import (
    EXIT_FAILED,
    EXIT_OK,
    BadInput,
    allow_keys,
    allowed_folders,
    bind_base_url,
    echo,
    echo_json,
    fmt_tokens,
    model_overrides,
    one_line,
    parse_pairs,
    printable,
    store_from_args,
)


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
            echo(f"loading model {ev['model']} …", file=sys.stderr, flush=True)
            return
        depth = ev.get("depth", 0)  # a nested run's events (a capability tool's agent), indented under the step
        if kind == "start":
            line = f"{'nested run' if depth else 'run'} {ev['run_id']}  model={ev['model']}  agent={ev['agent']}"
        elif kind == "resume":
            self.tokens = ev.get("tokens", 0)
            line = f"resuming {ev['run_id']} after step {ev['from_step']}"
        elif kind == "policy":
            self.tokens += ev["tokens_in"] + ev["tokens_out"]
            what = ("→ " + ", ".join(ev["calls"])) if ev["calls"] else (
                "answer: " + one_line(ev["answer"] or "") if ev.get("answer") else one_line(ev["text"]) or "(empty)")
            if ev["issues"]:
                what += f"  [{len(ev['issues'])} malformed call(s) reported back]"
            line = (f"  step {ev['step']:>3}  {el:7.1f}s  policy {ev['seconds']:6.2f}s  "
                    f"tokens {fmt_tokens(self.tokens):>6}  {what}")
        elif kind == "tool":
            mark = "error: " if ev["error"] else ""
            line = (f"  step {ev['step']:>3}  {el:7.1f}s  tool {ev['tool']:<12} {ev['seconds']:6.2f}s  "
                    f"{mark}{one_line(ev['content'], 60)}")
        elif kind == "error":
            line = f"  error: {ev['error']}"
        else:
            return
        print(printable("    " * depth + line) + ("\x1b[K" if self.tty else ""), file=sys.stderr, flush=True)


def _finish(result, args, score: float | None) -> int:
    out = {"run_id": result.run_id, "status": result.status, "answer": result.answer, "steps": result.steps,
           "tokens": result.tokens, "seconds": round(result.seconds, 3), "score": score}
    if result.error:  # why it failed, or what went wrong in a run that still finished (a failed edit subtask)
        out["error"] = result.error
    if args.json:
        echo_json(out)
    else:
        echo(f"{result.status}: {result.answer if result.answer is not None else '(no answer)'}")
        detail = f"{result.steps} steps, {result.tokens} tokens, {result.seconds:.1f} s"
        if score is not None:
            detail += f", score {score:g}"
        echo(f"run {result.run_id} ({detail})")
        if result.error:
            echo(f"note: {result.error}")
    return EXIT_OK if result.status == "finished" else EXIT_FAILED


def _score_run(store, result, spec) -> float | None:
    from ..evals.scoring import score_task_run

    value, note = score_task_run(store, result.run_id, spec, result.answer)
    if note:
        echo(f"note: {note}", file=sys.stderr)
    return value


def _check_evaluator(spec, source: str) -> None:
    """An evaluator no scorer or benchmark knows is a typo: refuse it before the run, not after it."""
    from ..evals.scoring import unknown_evaluator
    from ..spec import SpecError

    problem = unknown_evaluator(spec)
    if problem:
        raise BadInput(str(SpecError(source, [("evaluator.name", problem)])))


def cmd_run(args) -> int:
    from pydantic import ValidationError

    from ..agents.episode import EpisodeError, run_episode
    from ..spec import Reach, SpecError, TaskSpec, load_spec, resolve_model_path

    overridden = f"{args.task} (with command-line overrides)"
    try:
        allow_keys(args)  # before the spec is read: its model.api_key_env is checked against them
        reach = Reach(Path(args.task).parent, allowed_folders(args))  # the files it and its agent may touch
        spec = load_spec(args.task, allow_paths=reach.allowed)
        # Only what the file set, plus the overrides: defaults an agent or format fills in (DeepEyesV2's 9
        # turns, visual_program's sandbox) must stay unset here, or they would look chosen by the user.
        data = spec.model_dump(exclude_unset=True)
        if args.model is not None:
            data["model"] = {**data.get("model", {}), "name": args.model}
        bind_base_url(args, data)
        if args.agent is not None:
            data["agent"] = {**data.get("agent", {}), "name": args.agent}
        params = parse_pairs(getattr(args, "agent_param", None), "--agent-param")
        if params:
            data["agent"] = {**data.get("agent", {}), "params": {**data.get("agent", {}).get("params", {}), **params}}
        if args.max_steps is not None:
            data.setdefault("limits", {})["max_steps"] = args.max_steps
        options = model_overrides(args)
        if options:
            model = data.setdefault("model", {})
            model["options"] = {**model.get("options", {}), **options}
        spec = TaskSpec.model_validate(data)
        problem = resolve_model_path(spec, Path.cwd()) if args.model is not None else None
        if problem is not None:
            raise SpecError(overridden, [("model.name", problem)])
    except SpecError as err:
        raise BadInput(str(err)) from None
    except ValidationError as err:
        from ..spec import describe_errors

        raise BadInput(str(SpecError(overridden, describe_errors(err)))) from None
    _check_evaluator(spec, args.task)
    store = store_from_args(args)
    try:
        result = run_episode(spec, store, on_event=Progress(quiet=args.quiet), reach=reach)
    except EpisodeError as err:
        raise BadInput(f"{args.task}: {err}") from None
    return _finish(result, args, _score_run(store, result, spec))


def cmd_resume(args) -> int:
    from ..agents.episode import EpisodeError, resume_episode
    from ..spec import TaskSpec

    allow_keys(args)  # the run's spec was checked when it started; its key is read again now
    store = store_from_args(args)
    try:
        result = resume_episode(args.run_id, store, on_event=Progress(quiet=args.quiet))
    except EpisodeError as err:
        raise BadInput(str(err)) from None
    spec = TaskSpec.model_validate_json(store.get_run(result.run_id)["spec"])
    return _finish(result, args, _score_run(store, result, spec))

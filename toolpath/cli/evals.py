"""`toolpath models list`, `eval`, `eval list`, `report` and `view`."""

from __future__ import annotations

import sys

from ..progress import Progress
from .common import (
    EXIT_OK,
    BadInput,
    allowed_folders,
    echo,
    echo_json,
    error,
    model_overrides,
    one_line,
    parse_pairs,
    printable,
    store_from_args,
    when,
)


def cmd_models_list(args) -> int:
    from ..policies.base import kinds

    rows = kinds()
    if args.json:
        echo_json([r.__dict__ for r in rows])
        return EXIT_OK
    echo(f"{'KIND':<10} {'EXAMPLE':<26} {'HERE':<5} WHY")
    for r in rows:
        echo(f"{r.kind:<10} {r.example:<26} {'yes' if r.available else 'no':<5} {r.reason}")
    models = [m for r in rows for m in r.models]
    if models:
        echo("")
        echo(f"{'MODEL':<26} {'SIZE':>8}  {'INSTALLED':<9}  {'PROMPT':<25}  INSTALL WITH")
        for m in models:
            echo(f"{m['model']:<26} {m['size']:>8}  {'yes' if m['installed'] else 'no':<9}  {m['prompt']:<25}  "
                 f"{m['install']}")
    _kind_options("KV CACHE", "kv_cache")  # model.options.kv_cache / --kv-cache KIND[:N]
    _kind_options("DECODING", "decoder")  # model.options.decoding / --decoding KIND
    from ..policies.engines import default_choice, engines  # what runs a local text model: model.options.engine

    echo(f"\n{'ENGINE':<26} {'HERE':<5} WHY")
    for name, missing in engines():
        echo(f"{name:<26} {'no' if missing else 'yes':<5} {missing or 'model.options.engine: ' + name}")
    echo(f"{'(none named)':<26} {'':<5} {default_choice()}")
    return EXIT_OK


def _kind_options(title: str, registry_kind: str) -> None:
    """A family's kinds, each with its options (the first line: what N sets in KIND:N)."""
    from ..policies.settings import described

    echo(f"\n{title:<26} {'OPTION':<13} WHAT")
    for row in described(registry_kind):
        options = list(row["options"].items()) or [("", row["error"] or "no options")]
        for i, (option, what) in enumerate(options):
            echo(f"{row['form'] if i == 0 else '':<26} {option:<13} {what}")


def cmd_models_build(args) -> int:
    """Train a built model (`local:NAME` then loads it): each stage's progress on stderr (toolpath/progress.py)."""
    from ..train import metaembed_training, query_completion_training, tiny_molm, tiny_vlm
    from ..train.heap import reuse_freed_memory

    # this process only builds: its training steps allocate the same large gradients each time, and fresh pages
    # for them cost more than the maths (a process-wide allocator setting, so made here, not in the library)
    reuse_freed_memory()
    module = {"tiny-vlm": tiny_vlm, "tiny-molm": tiny_molm, "metaembed": metaembed_training,
              "query-completion": query_completion_training}
    build = module[args.name]
    try:
        report = build.build(args.seed)
    except RuntimeError as err:  # a missing part (easy-vqa, the bundled model, pydoc_data), said with how to get it
        raise BadInput(f"models build {args.name}: {err}") from err
    except KeyboardInterrupt:  # the folder is only ever replaced whole (train/folders.py), so nothing is half-written
        error(f"interrupted: {build.folder()} is as it was before this build (nothing half-written); "
              f"`toolpath models build {args.name}` starts it again from the beginning")
        return 130  # the shell's code for Ctrl-C, as main returns for any interrupted command
    if args.json:
        echo_json(report, indent=2)
    else:
        echo(_built_text(build.NAME, report))
    return EXIT_OK


def _built_text(name: str, report: dict) -> str:
    if name == "tiny-vlm":
        f = report["figures"]
        return (f"{name}: {report['folder']} ({report['seconds']['total']:.0f} s); easy-vqa test "
                f"{f['easy_vqa_test']['accuracy']:.3f} (blank image "
                f"{f.get('easy_vqa_blank_image', {}).get('accuracy', float('nan')):.3f}); use it as model: "
                "local:tiny-vlm")
    if name == "tiny-molm":
        f = report["figures"]
        return (f"{name}: {report['folder']} ({report['seconds']['total']:.0f} s); held-out molecules: "
                f"{f['all']['accuracy']:.3f} (yes/no {f['yes_no']['accuracy']:.3f}, numeric "
                f"{f['numeric']['accuracy']:.3f})")
    if name == "metaembed":
        return (f"{name}: {report['folder']} ({report['seconds']:.0f} s); training loss "
                f"{report['training']['loss_first']} -> {report['training']['loss_last10']:.3f}; measure it with "
                "python benchmarks/retrieval.py")
    return (f"{name}: {report['folder']} ({report['seconds']['total']:.0f} s); training loss "
            f"{report['training']['loss_first']} -> {report['training']['loss_last10']}; complete_query uses it, "
            "measure it with python benchmarks/query_completion.py")


def cmd_eval_list(args) -> int:
    store = store_from_args(args, readonly=True)
    rows = store.list_evals(limit=args.limit or 50)
    out = [{"id": r["id"], "benchmark": r["benchmark"], "model": r["model"], "n": r["n"], "done": r["done"],
            "score": (r["summary"] or {}).get("score"), "scoring": (r.get("params") or {}).get("scoring", "toolpath"),
            "started": when(r["created"]),
            "finished": bool(r["finished"])} for r in rows]
    if args.json:
        echo_json(out)
        return EXIT_OK
    echo(f"{'EVAL':<26} {'BENCHMARK':<16} {'MODEL':<20} {'DONE':>9} {'SCORE':>7} {'SCORING':<8}  STARTED")
    for r in out:
        score = "" if r["score"] is None else f"{r['score']:.3f}"
        done = f"{r['done']}/{r['n']}" + ("" if r["finished"] else "*")
        echo(f"{r['id']:<26} {r['benchmark']:<16} {one_line(r['model'], 20):<20} {done:>9} {score:>7} "
             f"{r['scoring']:<8}  {r['started']}")
    if any(not r["finished"] for r in out):
        echo("* not finished: toolpath eval BENCHMARK --resume EVAL continues it")
    return EXIT_OK


class EvalProgress:
    """Samples scored of the eval, accuracy so far, rate and time left, and the last sample's id, outcome and
    answer (made printable: it is the model's text): one stage of toolpath/progress.py, on stderr."""

    def __init__(self, benchmark: str):
        self.benchmark = benchmark
        self.stage: Progress | None = None
        self.scores: list[float] = []

    def __call__(self, i: int, n: int, s) -> None:
        if self.stage is None:  # samples already done when this process began (a resumed eval) are not in the rate
            self.stage = Progress(f"eval {self.benchmark}", n, "samples", initial=i - 1)
        self.scores.append(s.score)
        acc = sum(self.scores) / len(self.scores)
        self.stage.update(1, value=printable(f"acc {acc:.3f}, last {s.sample_id[:30]} {s.status} score {s.score:g} "
                                             f"answer: {one_line(s.answer or s.error or '', 40)}"))

    def close(self, outcome: str = "") -> None:
        if self.stage is not None:
            self.stage.close(outcome)


def cmd_eval(args) -> int:
    from .. import registry
    from ..evals.benchmarks import BenchmarkDataError, UnknownBenchmark
    from ..evals.runner import ResumeError, run_eval
    from ..spec import ModelSpec

    if args.benchmark == "list":
        return cmd_eval_list(args)
    if args.benchmark not in registry.names("benchmark"):
        available = ", ".join(registry.names("benchmark"))
        raise BadInput(str(UnknownBenchmark(f"unknown benchmark {args.benchmark!r}; available: {available}")))
    if args.model is not None:
        from pydantic import ValidationError

        try:
            ModelSpec(name=args.model)
        except ValidationError as err:
            raise BadInput(f"--model {args.model!r}: {err.errors()[0]['msg'].removeprefix('Value error, ')}") from None
    options = model_overrides(args)
    if "kv_cache" in options:  # run_eval takes the parsed setting; checked here so the error names the flag
        from ..policies.settings import setting

        try:
            options["kv_cache"] = setting("kv_cache", options["kv_cache"]).dump()
        except ValueError as err:
            raise BadInput(f"--kv-cache {args.kv_cache!r}: {err}") from None
    store = store_from_args(args)
    on_sample = EvalProgress(args.benchmark)

    def on_event(ev: dict) -> None:  # per-sample lines come from on_sample; only say when a model loads
        if ev["type"] == "loading" and not args.quiet:
            echo(f"loading model {ev['model']} …", file=sys.stderr, flush=True)

    try:
        result = run_eval(args.benchmark, store, model=args.model, limit=args.limit, seed=args.seed, data=args.data,
                          on_sample=on_sample, on_event=on_event, workers=args.workers, executor=args.executor,
                          resume=args.resume, timeout=args.timeout, retries=args.retries,
                          scoring=args.scoring, allow_paths=allowed_folders(args), **options,
                          categories=list(dict.fromkeys(c.strip() for given in args.category or ()
                                                        for c in given.split(",") if c.strip())),
                          agent_params=parse_pairs(getattr(args, "agent_param", None), "--agent-param"))
    except (BenchmarkDataError, ResumeError) as err:  # missing data (named file and variable), a bad --resume
        raise BadInput(str(err)) from None
    except ValueError as err:  # bad --workers, --timeout, --executor ray without ray
        raise BadInput(str(err)) from None
    except KeyboardInterrupt:  # every sample scored so far is in the store, each one whole
        on_sample.close("interrupted")
        error(f"interrupted: the samples scored so far are kept; `toolpath eval list` shows the eval's id and "
              f"`toolpath eval {args.benchmark} --resume EVAL_ID` scores the rest")
        return 130  # the shell's code for Ctrl-C, as main returns for any interrupted command
    on_sample.close()
    summary = result.summary()
    keys = ("eval_id", "benchmark", "n", "weights", "score", "scoring", "scores", "by_category", "tokens", "seconds",
            "overall_excludes", "n_overall",
            "metrics", "closeness", "cost_usd", "unpriced", "retries", "timed_out")
    if args.json:
        echo_json({k: summary[k] for k in keys if k in summary})
        return EXIT_OK
    names = list(summary.get("metrics", {}))  # the benchmark's own numbers, one column each

    def cells(m: dict) -> str:
        return "".join(f" {m.get(k, float('nan')):>{max(9, len(k))}.3f}" for k in names)

    weights = f"  weights {summary['weights']}" if summary.get("weights") else ""
    echo(f"eval {summary['eval_id']}  benchmark {summary['benchmark']}  model {summary['model']}{weights}")
    echo(f"{'CATEGORY':<12} {'N':>4} {'SCORE':>7}" + "".join(f" {k:>{max(9, len(k))}}" for k in names))
    for cat, v in summary["by_category"].items():
        echo(f"{cat:<12} {v['n']:>4} {v['score']:>7.3f}" + cells(v.get("metrics", {})))
    n_all = summary.get("n_overall", summary["n"])
    echo(f"{'all':<12} {n_all:>4} {summary['score']:>7.3f}" + cells(summary.get("metrics", {}))
           + f"   tokens {summary['tokens']}  {summary['seconds']:.1f} s" + _cost_text(summary))
    other = [f"{mode} {value:.3f}" for mode, value in summary["scores"].items() if mode != summary["scoring"]]
    echo(f"scores are {summary['scoring']} scoring; the same answers scored otherwise: {', '.join(other)}")
    if summary.get("closeness"):
        from ..evals.dag.runs import closeness_text

        echo(closeness_text(summary["closeness"]))
    if summary.get("overall_excludes"):
        echo(f"(all leaves out {', '.join(summary['overall_excludes'])}, as {summary['benchmark']} reports it)")
    return EXIT_OK


def _cost_text(summary: dict) -> str:
    out = ""
    if summary.get("cost_usd") is not None:
        out += f"  ${summary['cost_usd']:.4f}"
        if summary.get("unpriced"):
            out += f" ({summary['unpriced']} samples not priced)"
    elif summary.get("n"):
        out += "  cost: not priced (add the model to prices.json)"
    if summary.get("retries"):
        out += f"  {summary['retries']} model retries"
    if summary.get("timed_out"):
        out += f"  {summary['timed_out']} timed out"
    return out


def cmd_report(args) -> int:
    from ..evals.report import write_report

    store = store_from_args(args, readonly=True)
    try:
        out = write_report(store, args.eval_ids, out_dir=args.out, viewer_url=args.viewer_url)
    except ValueError as err:  # an unknown eval id
        raise BadInput(str(err)) from None
    if args.json:
        echo_json(out)
    else:
        for key in ("html", "markdown", "md"):
            if out.get(key):
                echo(out[key])
    return EXIT_OK


def cmd_view(args) -> int:
    from ..viewer import serve_forever

    serve_forever(home=store_from_args(args, readonly=True).home, host="127.0.0.1", port=args.port)
    return EXIT_OK

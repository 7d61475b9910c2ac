"""The baseline table: every benchmark that runs here, with real local models, beside its scripted or rule-based
upper bound, written as a results page.

    python benchmarks/baselines.py [--models qwen2.5-coder-0.5b qwen2.5-coder-1.5b] [--benchmarks arith ...]
                                   [--limit 10] [--engine onnxruntime] [--weights int4] [--bfcl-category C ...]
                                   [--scoring official] [--timeout 300] [--out docs/results/baselines.md] [--json]

Each row is one eval (evals/runner.run_eval, in this process, so each model is loaded once for all benchmarks;
its samples are in the run store: `toolpath eval list`): the score in `--scoring` mode with its 95 % interval
(the report's bootstrap, evals/report.eval_numbers), the median seconds per episode, and the tokens each episode
prefilled and reused (the policy steps' prefill_tokens / reused_tokens). Per benchmark:

    arith          react + calculator                     bound: a scripted solver (tests/helpers.ArithPolicy)
    edits          fast_slow, the model writes the chain    bound: the grammar planner (no model)
    mindcube       visual_program, the shipped questions over the shared images
    omni3d_bench   visual_program, the shared sample
    tabletop       embodied; a text model gets the instruction, not the camera image (so no retries)
                                                          bounds: oracle (simulator truth), detector (rule-based)
    miniwob        computer_use on the DOM task types, the page's elements given as text (page_text.py)
                                                          bound: dom (rule-based)
    bfcl           react, one row per category (official: the package's AST checker)
    pope, chair    on local:tiny-vlm (a vision model; the text models cannot see the image), its default engine

A benchmark that cannot run here (its data, model or browser missing) is a row saying why; one that fails is a
row with the error, and the run goes on. The page is rewritten (atomically) after every row, so Ctrl-C keeps
every finished row. The engine and weights apply to the text models; the bounds run no model or their own.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from unittest.mock import patch

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))  # page_text, the python: policy that gives MiniWoB's page to a text model as text
sys.path.insert(0, str(ROOT / "tests"))  # helpers.ArithPolicy, arith's scripted bound

DEFAULT_MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
VISION_MODEL = "tiny-vlm"
BFCL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
SHARED_DATA = ROOT.parent / "shared" / "data"
PACKAGES = ("toolpath", "onnxruntime-genai", "onnxruntime", "transformers", "torch", "bfcl-eval", "miniwob",
            "playwright")
ERROR_CHARS = 240  # an error cell longer than this is cut


@dataclass(frozen=True)
class Bound:
    model: str | None  # None: the benchmark's own rule-based default (edits' grammar planner needs no model)
    label: str


@dataclass(frozen=True)
class Plan:
    """How one row's eval is run."""
    label: str
    benchmark: str
    data: tuple[str, Path] | None = None  # (the variable that names its data folder, the shared copy's folder)
    categories: tuple[str, ...] | None = None
    agent_params: dict | None = None
    env: dict = field(default_factory=dict)  # the benchmark's own TOOLPATH_* settings for this row
    bounds: tuple[Bound, ...] = ()
    vision: bool = False  # run on local:tiny-vlm, once, instead of on each text model
    page_text: bool = False  # the text model reads the page's elements as text (page_text.py)
    note: str = ""


def plans(bfcl_categories=BFCL_CATEGORIES) -> dict[str, list[Plan]]:
    """benchmark name → its rows, in the page's order."""
    return {
        "arith": [Plan("arith", "arith", bounds=(Bound("python:helpers:ArithPolicy", "scripted"),))],
        "edits": [Plan("edits", "edits", agent_params={"planner": "policy"},
                       bounds=(Bound(None, "grammar planner"),), note="the model writes the subtask chain")],
        "mindcube": [Plan("mindcube", "mindcube", data=("TOOLPATH_MINDCUBE_DIR", SHARED_DATA / "mindcube"),
                          note="the shipped sample's questions")],
        "omni3d_bench": [Plan("omni3d_bench", "omni3d_bench",
                              data=("TOOLPATH_OMNI3D_DIR", SHARED_DATA / "omni3d_bench"), note="the shared sample")],
        # A text model does not see the camera image, so a failed consistency check would only be asked again
        # blind: no retries, which keeps its episodes to one attempt's time.
        "tabletop": [Plan("tabletop", "tabletop", agent_params={"retries": 0},
                          bounds=(Bound("oracle", "oracle"), Bound("detector", "detector")),
                          note="text model: the instruction, not the camera image; no retries")],
        "miniwob": [Plan("miniwob", "miniwob", env={"TOOLPATH_MINIWOB_TASKS": "dom"}, page_text=True,
                         bounds=(Bound("dom", "dom"),), note="DOM task types; the page's elements as text")],
        "bfcl": [Plan(f"bfcl/{c}", "bfcl", categories=(c,)) for c in bfcl_categories],
        "pope": [Plan("pope", "pope", vision=True)],
        "chair": [Plan("chair", "chair", vision=True)],
    }


# ---- arguments --------------------------------------------------------------------------------------------

def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value
    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from toolpath.spec import SCORING_MODES, WEIGHTS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), metavar="NAME",
                    help="local text models (catalog names, with or without 'local:')")
    ap.add_argument("--benchmarks", nargs="+", default=list(plans()), metavar="NAME", help="default: all")
    ap.add_argument("--limit", type=_positive(int), default=10, help="samples per row (default 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", default="onnxruntime", help="the text models' engine (default onnxruntime)")
    ap.add_argument("--weights", default="int4", choices=WEIGHTS, help="the text models' weights (default int4)")
    ap.add_argument("--bfcl-category", action="append", metavar="C",
                    help=f"BFCL categories, a row each (default: {', '.join(BFCL_CATEGORIES)})")
    ap.add_argument("--scoring", default="official", choices=SCORING_MODES)
    ap.add_argument("--timeout", type=_positive(float), default=300.0, help="seconds per episode (default 300)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "baselines.md", help="the results page")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON at the end")
    args = ap.parse_args(argv)
    args.command = argv if argv is not None else sys.argv[1:]
    try:
        check_args(args)
    except ValueError as err:
        ap.error(str(err))
    return args


def check_args(args: argparse.Namespace) -> None:
    """Every argument the run depends on, before anything loads: a ValueError naming the flag and the choices."""
    from toolpath.evals.benchmarks import BenchmarkDataError
    from toolpath.evals.benchmarks.bfcl_data import check_category
    from toolpath.evals.runner import model_option
    from toolpath.policies.local_models import names

    args.models = [m.removeprefix("local:") for m in args.models]
    unknown = [m for m in args.models if m not in names()]
    if unknown:
        raise ValueError(f"--models: unknown local text model {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(names())}")
    known = list(plans())
    unknown = [b for b in args.benchmarks if b not in known]
    if unknown:
        raise ValueError(f"--benchmarks: unknown {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    args.engine = model_option("engine", args.engine)["kind"]  # its message names --engine and the engines
    args.bfcl_category = list(dict.fromkeys(args.bfcl_category or BFCL_CATEGORIES))
    for c in args.bfcl_category:
        try:
            check_category(c)
        except BenchmarkDataError as err:
            raise ValueError(f"--bfcl-category: {err}") from None
    if args.out.is_dir():
        raise ValueError(f"--out {args.out}: is a folder; name the page's file, e.g. {args.out / 'baselines.md'}")


# ---- one row --------------------------------------------------------------------------------------------

def data_folder(plan: Plan) -> Path | None:
    """The folder the row reads: its variable's, else the shared copy (None when the benchmark needs none)."""
    if plan.data is None:
        return None
    env, shared = plan.data
    return Path(os.environ.get(env) or shared)


def _installed_local(name: str) -> str:
    """'' when `local:name` can load here, else why not and how to get it."""
    from toolpath.policies.local_models import variants

    for row in variants():
        if row["model"] == f"local:{name}":
            return "" if row["installed"] else f"local:{name} is not installed here (install: {row['install']})"
    return f"local:{name} is not a local model"


def unavailable(plan: Plan, loads: str | None) -> str:
    """Why the row cannot run on this machine, or ''. `loads`: the local model it loads, if any."""
    if loads:
        missing = _installed_local(loads.removeprefix("local:"))
        if missing:
            return missing
    folder = data_folder(plan)
    if folder is not None and not folder.is_dir():
        return f"its data is not here: {folder} (set {plan.data[0]})"
    if plan.benchmark == "miniwob":
        from toolpath.sandboxes.browser import CHROMIUM_ENV, chromium_path

        if not chromium_path():
            return f"no Chromium here (apt-get install chromium, or set {CHROMIUM_ENV})"
    return ""


def _cut(text: str, limit: int = ERROR_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


def row_figures(store, eval_id: str) -> dict:
    """What the table says of one stored eval: n, score and its interval (the report's), the median seconds per
    episode, the tokens prefilled and reused per episode, and how many samples failed (with the first error)."""
    from toolpath.evals.report import eval_numbers

    num = eval_numbers(store, store.get_eval(eval_id))
    samples = store.eval_samples(eval_id)
    prefilled = reused = 0
    counted = 0  # episodes whose policy said what it prefilled (a rule-based one says nothing)
    for s in samples:
        steps = store.steps(s["run_id"]) if s["run_id"] else []
        told = [st["payload"] for st in steps if isinstance(st["payload"], dict) and "prefill_tokens" in st["payload"]]
        if told:
            counted += 1
            prefilled += sum(int(p.get("prefill_tokens") or 0) for p in told)
            reused += sum(int(p.get("reused_tokens") or 0) for p in told)
    failed = [f for f in num["failures"] if f["status"] != "finished"]
    first_error = next((f["error"] for f in failed if f.get("error")), None)
    return {"eval_id": eval_id, "n": num["overall"]["n"], "score": num["overall"]["score"],
            "ci": num["overall"]["ci"], "scoring": num["scoring"],
            "median_s": statistics.median(float(s["seconds"]) for s in samples) if samples else None,
            "prefilled": prefilled / counted if counted else None, "reused": reused / counted if counted else None,
            "failed": len(failed), "error": _cut(first_error) if first_error else None,
            "wall_s": num["wall_seconds"]}


@dataclass(frozen=True)
class Job:
    """One row to run: a plan with a model (a text model of --models, a bound's policy, or the vision model)."""
    plan: Plan
    model: str | None  # the eval's model string (None: the benchmark's own default)
    loads: str | None  # the local model it loads, checked before it starts
    row_model: str  # the table it belongs to
    text_model: bool  # takes --engine, --weights and the plan's agent params
    bound: str | None = None  # the bound's label, for an upper-bound row

    def start(self) -> dict:
        return {"benchmark": self.plan.label, "model": self.row_model, "note": self.plan.note,
                **({"bound": self.bound} if self.bound else {})}


def run_row(job: Job, args, store) -> dict:
    """One row: its eval run and read back, or why it did not run, or the error that stopped it."""
    from toolpath.evals.runner import run_eval

    plan, row = job.plan, job.start()
    why = unavailable(plan, job.loads)
    if why:
        return {**row, "status": "not run", "error": why}
    folder = data_folder(plan)
    try:
        with patch.dict(os.environ, plan.env):  # the row's own settings, then the environment as it was
            result = run_eval(plan.benchmark, store, model=job.model, limit=args.limit, seed=args.seed,
                              data=str(folder) if folder else None, timeout=args.timeout, scoring=args.scoring,
                              engine=args.engine if job.text_model else None,
                              weights=args.weights if job.text_model else None,
                              agent_params=plan.agent_params if job.text_model else None,
                              categories=list(plan.categories) if plan.categories else None)
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 — one benchmark's failure is its row; the run goes on
        return {**row, "status": "failed", "error": _cut(f"{type(err).__name__}: {err}")}
    return {**row, "status": "ran", **row_figures(store, result.eval_id)}


# ---- the page ------------------------------------------------------------------------------------------

def _f(x, nd: int = 3) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def score_cell(row: dict) -> str:
    if row.get("status") != "ran":
        return "–"
    ci = row.get("ci")
    return f"{_f(row['score'])} [{_f(ci[0])}, {_f(ci[1])}]" if ci else _f(row["score"])


def _tokens(x) -> str:
    return "–" if x is None else f"{x:.0f}"


def _md(text) -> str:
    return str(text or "").replace("|", "\\|").replace("\n", " ")


def notes_cell(row: dict) -> str:
    parts = [row.get("note") or ""]
    if row.get("status") == "not run":
        parts.append(f"not run: {row.get('error')}")
    elif row.get("status") == "failed":
        parts.append(f"failed: {row.get('error')}")
    elif row.get("status") == "interrupted":
        parts.append("interrupted (Ctrl-C)")
    elif row.get("failed"):
        parts.append(f"{row['failed']} of {row['n']} episodes failed, e.g. {row.get('error')}")
    if row.get("eval_id"):
        parts.append(f"eval {row['eval_id']}")
    return _md("; ".join(p for p in parts if p))


def bound_cell(bounds: list[dict]) -> str:
    return "<br>".join(f"{b['bound']}: {score_cell(b)}" for b in bounds) or "–"


HEADER = ("| benchmark | n | score [95 % CI] | median s / episode | prefilled / episode | reused / episode "
          "| upper bound | notes |")


def model_table(rows: list[dict], bounds: dict[str, list[dict]]) -> list[str]:
    out = [HEADER, "|" + "---|" * 8]
    for r in rows:
        ran = r.get("status") == "ran"
        out.append(f"| {r['benchmark']} | {r.get('n', '–') if ran else '–'} | {score_cell(r)} | "
                   f"{_f(r.get('median_s'), 1) if ran else '–'} | {_tokens(r.get('prefilled'))} | "
                   f"{_tokens(r.get('reused'))} | {bound_cell(bounds.get(r['benchmark'], []))} | {notes_cell(r)} |")
    return out


def render_page(meta: dict, rows: list[dict]) -> str:
    """The results page: how it was made, then a table per model with each benchmark's bound beside it."""
    bounds: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("bound"):
            bounds.setdefault(r["benchmark"], []).append(r)
    machine = meta["machine"]
    lines = ["# Baselines: real local models through toolpath", "",
             f"Made by `{meta['command']}` on {meta['date']}.", "",
             f"- Machine: {machine['cores']} cores, {machine['platform']}; load average (1, 5, 15 min) "
             f"{machine['load_start']} at the start, {machine['load_end']} at the end; "
             f"{meta.get('wall_s', 0) / 60:.0f} min of wall time{' so far' if meta.get('running') else ''}.",
             f"- Settings: text models on engine `{meta['engine']}`, weights `{meta['weights']}`; up to "
             f"{meta['limit']} samples a row (seed {meta['seed']}); {meta['scoring']} scoring; "
             f"{meta['timeout']:g} s per episode at most.",
             "- Packages: " + ", ".join(f"{k} {v}" for k, v in meta["packages"].items()) + ".",
             "- Score: the eval's mean in that scoring mode, with its 95 % bootstrap interval. Tokens: per episode, "
             "summed over its policy steps; reused = prompt tokens whose KV state an earlier call left. Upper "
             "bound: the scripted or rule-based policy of the benchmark, on the same samples.", ""]
    models = list(dict.fromkeys(r["model"] for r in rows if not r.get("bound")))
    for m in models:
        lines += [f"## {m}", "", *model_table([r for r in rows if r["model"] == m and not r.get("bound")], bounds), ""]
    if bounds:
        lines += ["## Upper bounds", "", "| benchmark | bound | n | score [95 % CI] | median s / episode | notes |",
                  "|---|---|---|---|---|---|"]
        for label, bs in bounds.items():
            for b in bs:
                ran = b.get("status") == "ran"
                lines.append(f"| {label} | {b['bound']} | {b.get('n', '–') if ran else '–'} | {score_cell(b)} | "
                             f"{_f(b.get('median_s'), 1) if ran else '–'} | {notes_cell({**b, 'note': ''})} |")
        lines.append("")
    return "\n".join(lines)


def write_atomically(path: Path, text: str) -> None:
    """The whole page or the previous one, never half of one (a reader or a Ctrl-C in between)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _versions() -> dict[str, str]:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def run_meta(args) -> dict:
    return {"command": "python benchmarks/baselines.py " + shlex.join(args.command),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": {"cores": os.cpu_count(), "platform": platform.platform(), "load_start": _load(),
                        "load_end": _load()},
            "packages": _versions(), "engine": args.engine, "weights": args.weights, "limit": args.limit,
            "seed": args.seed, "scoring": args.scoring, "timeout": args.timeout}


# ---- the run -------------------------------------------------------------------------------------------

def jobs(args) -> list[Job]:
    """The rows in run order: per text model each benchmark's row, its bounds right after its first row (so a
    short run has them beside its first model); then the vision model's rows."""
    from page_text import model_name

    table = plans(args.bfcl_category)
    chosen = [p for b in args.benchmarks for p in table[b]]
    out, bounded = [], set()
    for name in args.models:
        local = f"local:{name}"
        for p in (p for p in chosen if not p.vision):
            out.append(Job(p, model_name(name) if p.page_text else local, local, local, True))
            if p.label not in bounded:
                bounded.add(p.label)
                out += [Job(p, b.model, None, local, False, b.label) for b in p.bounds]
    vision = f"local:{VISION_MODEL}"
    out += [Job(p, vision, vision, vision, False) for p in chosen if p.vision]
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from toolpath.runs import open_store

    meta, rows = run_meta(args), []
    started = time.monotonic()

    def save(running: bool = True) -> None:
        meta["machine"]["load_end"] = _load()
        meta.update(wall_s=round(time.monotonic() - started, 1), running=running)
        write_atomically(args.out, render_page(meta, rows))

    code = 0
    with open_store() as store:
        for job in jobs(args):
            label = f"{job.plan.label} · {job.bound or job.row_model}"
            print(f"baselines: {label} …", file=sys.stderr, flush=True)
            try:
                row = run_row(job, args, store)
            except KeyboardInterrupt:
                rows.append({**job.start(), "status": "interrupted"})
                code = 130
                print("baselines: interrupted; the rows finished so far are on the page", file=sys.stderr)
                break
            rows.append(row)
            print(f"baselines: {label}: {row['status']} {score_cell(row)}"
                  + (f" ({row['error']})" if row.get("status") != "ran" else ""), file=sys.stderr, flush=True)
            save()
        save(running=False)
    print(f"baselines: the page is {args.out}", file=sys.stderr)
    if args.json:
        print(json.dumps({**meta, "rows": rows}, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())

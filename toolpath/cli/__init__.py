"""`toolpath`: run | resume | runs | dag | tools | models | eval | compress | mcp | serve | curate.

Exit codes: 0 the agent finished, 1 it failed or ran out of budget, 2 bad input (spec, arguments, ids).
Only argparse and the standard library load while the arguments are parsed: each command is named by
"module:function" and imported once it runs, so `toolpath --help` (and any `toolpath COMMAND --help`) loads none
of pydantic, torch, transformers or langgraph (tests/test_cli_startup.py checks it).

The parser and the dispatch live here; each command is in the module of its group: run.py (run, resume),
runs.py, tools.py, evals.py (models, eval, report, view), mcp.py (mcp serve), serve.py, curate.py; common.py holds
what they share.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from .common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, BadInput, add_reach_arguments, error

# The spec's model.options.weights values (spec.WEIGHTS; spelled out here so `toolpath --help` imports no pydantic).
WEIGHTS = ("fp32", "bf16", "int8", "int4")
KV_CACHE_HELP = ("a KV cache for local models: kivi, chanmix, quest or icecache, with N its bits (quantized) or "
                 "token budget (sparse), e.g. chanmix:2 (sets model.options.kv_cache)")
WEIGHTS_HELP = ("how a local model's weights are held: fp32 (as loaded), bf16, int8 or int4 weight-only "
                "(sets model.options.weights)")
ENGINE_HELP = ("what runs a local text model: torch (transformers; kv caches and decoding methods need it) or "
               "onnxruntime (ONNX Runtime GenAI, exported once); unset: onnxruntime where it can run the model, torch "
               "otherwise (sets model.options.engine)")
DECODING_HELP = ("hallucination-mitigated decoding for local vision-language models: vcd or shield with their "
                 "defaults, or a JSON mapping with kind and options, e.g. '{\"kind\": \"vcd\", \"alpha\": 0.5}' "
                 "(sets model.options.decoding)")


def _add_model_arguments(parser, scope: str = "") -> None:
    """--kv-cache, --weights, --engine and --decoding: the model.options run, eval and serve take alike (read by
    common.model_overrides); `scope` says what they apply to, e.g. " for every task"."""
    parser.add_argument("--kv-cache", metavar="KIND[:N]", help=KV_CACHE_HELP + scope)
    parser.add_argument("--weights", choices=WEIGHTS, help=WEIGHTS_HELP + scope)
    parser.add_argument("--engine", metavar="NAME", help=ENGINE_HELP + scope)
    parser.add_argument("--decoding", metavar="KIND", help=DECODING_HELP + scope)


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
    p.add_argument("--home",  # unset: the commands open toolpath.paths.home(), the one reader of $TOOLPATH_HOME
                   help="where runs.db and artifacts live (default $TOOLPATH_HOME or ~/.toolpath)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser("run", help="run an agent on a task spec (YAML or JSON)")
    r.add_argument("task", help="path to the task spec")
    r.add_argument("--model", help="override the spec's model, e.g. local, openai:gpt-4.1-mini, scripted:r.yaml")
    r.add_argument("--agent", help="override the spec's agent, e.g. react")
    r.add_argument("--max-steps", type=int, help="override limits.max_steps")
    r.add_argument("--agent-param", action="append", metavar="KEY=VALUE",
                   help="set agent.params.KEY (a JSON value or plain text; repeatable), e.g. planner=policy")
    _add_model_arguments(r)
    add_reach_arguments(r)
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    r.set_defaults(fn="run:cmd_run")

    rs = sub.add_parser("resume", help="continue a run that was interrupted, from its last checkpoint")
    rs.add_argument("run_id")
    rs.add_argument("--json", action="store_true")
    rs.add_argument("-q", "--quiet", action="store_true")
    add_reach_arguments(rs, paths=False, base_url=False)
    rs.set_defaults(fn="run:cmd_resume")

    runs = sub.add_parser("runs", help="stored runs").add_subparsers(dest="sub", metavar="SUBCOMMAND", required=True)
    rl = runs.add_parser("list", help="the most recent runs")
    rl.add_argument("--limit", type=int, default=30)
    rl.add_argument("--json", action="store_true")
    rl.set_defaults(fn="runs:cmd_runs_list")
    rsh = runs.add_parser("show", help="every step of one run (id or unique prefix)")
    rsh.add_argument("run_id")
    rsh.add_argument("--json", action="store_true")
    rsh.add_argument("--dag", action="store_true",
                     help="the run as a reasoning graph: its tool results, which later steps use each, and closeness")
    rsh.set_defaults(fn="runs:cmd_runs_show")

    dag = sub.add_parser("dag", help="DAG-MATH trajectories").add_subparsers(dest="sub", metavar="SUBCOMMAND",
                                                                           required=True)
    dc = dag.add_parser("check", help="check a trajectory (a JSON list of steps) against the format's rules; "
                                      "exit 0 when valid, 1 when not")
    dc.add_argument("file", help="the trajectory: [step, ...], {\"steps\": [...]} or a formatted-set problem file")
    dc.add_argument("--json", action="store_true", help="print valid, closed, closeness, violations, answer, depth, "
                                                        "width (and branching, nodes, edges, facts) as one object")
    dc.set_defaults(fn="dag:cmd_dag_check")

    tools = sub.add_parser("tools", help="registered tools").add_subparsers(dest="sub", metavar="SUBCOMMAND",
                                                                           required=True)
    tl = tools.add_parser("list", help="all tools with their cost and quality priors")
    tl.add_argument("--json", action="store_true")
    tl.set_defaults(fn="tools:cmd_tools_list")
    ts = tools.add_parser("show", help="a tool's JSON schema")
    ts.add_argument("name")
    ts.set_defaults(fn="tools:cmd_tools_show")
    tc = tools.add_parser("call", help="call a tool directly")
    tc.add_argument("name")
    tc.add_argument("--arg", action="append", metavar="KEY=VALUE", help="an argument (JSON value or plain text)")
    tc.add_argument("--input", action="append", metavar="PATH",
                    help="a file the call may read (read_file); images are also named image_1, image_2, … "
                         "in order, audio (wav, flac, mp3, ogg) audio_1, audio_2, …, molecules (.smi, .sdf, .mol: each "
                         "molecule of each file) graph_1, graph_2, …")
    tc.add_argument("--json", action="store_true")
    tc.set_defaults(fn="tools:cmd_tools_call")
    tk = tools.add_parser("calibrate", help="measure the image-edit tools' cost and quality; write the priors table")
    tk.add_argument("--tasks", type=int, default=40, help="generated edit tasks to sample subtasks from (default 40)")
    tk.add_argument("--seed", type=int, default=1000,
                    help="their seed (default 1000: not the benchmark's 0, so priors are not fitted to it)")
    tk.add_argument("--repeats", type=int, default=1, help="runs per tool and sample (default 1)")
    tk.add_argument("--out", metavar="PATH", help="table to write (default $TOOLPATH_HOME/priors/edit_tools.json)")
    tk.add_argument("--json", action="store_true")
    tk.set_defaults(fn="tools:cmd_tools_calibrate")

    models = sub.add_parser("models", help="policy kinds").add_subparsers(dest="sub", metavar="SUBCOMMAND",
                                                                         required=True)
    ml = models.add_parser("list", help="each policy kind and whether it can run here")
    ml.add_argument("--json", action="store_true")
    ml.set_defaults(fn="evals:cmd_models_list")
    mb = models.add_parser("build", help="train a model that is made here, not downloaded (tiny-vlm, tiny-molm, "
                                         "metaembed, query-completion)")
    mb.add_argument("name", choices=("tiny-vlm", "tiny-molm", "metaembed", "query-completion"),
                    help="the model to build")
    mb.add_argument("--seed", type=int, default=0, help="everything follows from it (default 0)")
    mb.add_argument("--json", action="store_true",
                    help="print the build's report (tiny_vlm.json, tiny_molm.json, metaembed.json, "
                         "query_completion.json) as JSON")
    mb.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    mb.set_defaults(fn="evals:cmd_models_build")

    ev = sub.add_parser("eval", help="run a benchmark's records as tasks and score them")
    ev.add_argument("benchmark", help="benchmark name, e.g. arith; or `list` for the stored evals")
    ev.add_argument("--limit", type=int, help="at most N records")
    ev.add_argument("--model", help="the model for every task (default: the benchmark's, else local)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--agent-param", action="append", metavar="KEY=VALUE",
                    help="an agent parameter for every task (a JSON value or plain text; repeatable), "
                         "e.g. planner=policy; kept by --resume")
    _add_model_arguments(ev, " for every task; kept by --resume")
    ev.add_argument("--data", metavar="PATH",
                    help="the benchmark's data (OSWorld-G, ScreenSpot: a JSON file or folder)")
    ev.add_argument("--category", action="append", metavar="NAME", help="run only this subset of the benchmark "
                    "(BFCL: simple_python, multiple, parallel, …; repeatable or comma-separated); kept by --resume")
    ev.add_argument("--allow-path", action="append", metavar="DIR", help="a folder whose files the data set's rows "
                    "may name besides the data set's own (repeatable; not kept by --resume: give it again)")
    ev.add_argument("--workers", type=int, default=1, help="episodes at once (local worker processes; default 1)")
    ev.add_argument("--executor", choices=("local", "ray"), default="local",
                    help="local processes (default) or Ray ($RAY_ADDRESS, else a local Ray)")
    ev.add_argument("--resume", metavar="EVAL_ID", help="continue an interrupted eval: its finished samples are kept")
    ev.add_argument("--timeout", type=float, metavar="S", help="time limit per episode, seconds")
    ev.add_argument("--retries", type=int, default=4, help="attempts per model call on transient errors (default 4)")
    ev.add_argument("--scoring", choices=("toolpath", "official"), default="toolpath",
                    help="which scorer is the score: ours (default) or the published one, bugs included; both "
                         "are stored and shown")
    ev.add_argument("--json", action="store_true")
    ev.add_argument("-q", "--quiet", action="store_true")
    ev.set_defaults(fn="evals:cmd_eval")
    rp = sub.add_parser("report", help="write an HTML and Markdown report of one or more evals, with plots")
    rp.add_argument("eval_ids", nargs="+", metavar="EVAL_ID", help="eval ids (or unique prefixes); several compare")
    rp.add_argument("--out", metavar="DIR", help="where to write it (default $TOOLPATH_HOME/reports/…)")
    rp.add_argument("--viewer-url", metavar="URL", help="link failures to this trace viewer (toolpath view)")
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(fn="evals:cmd_report")
    vw = sub.add_parser("view", help="serve the trace viewer on 127.0.0.1 (runs, evals, every step)")
    vw.add_argument("--port", type=_port, default=8765, help="port (default 8765; 0 picks a free one)")
    vw.set_defaults(fn="evals:cmd_view")

    mcp = sub.add_parser("mcp", help="MCP (Model Context Protocol)").add_subparsers(dest="sub", metavar="SUBCOMMAND",
                                                                                  required=True)
    ms = mcp.add_parser("serve", help="serve the registered tools as an MCP server (stdio, or HTTP on 127.0.0.1)")
    ms.add_argument("--tools", action="append", metavar="NAMES",
                    help="comma-separated tools to serve (repeatable; default: all but final_answer)")
    ms.add_argument("--http", type=_port, metavar="PORT",
                    help="streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio (0 picks a free port)")
    ms.add_argument("--sandbox", metavar="KIND",
                    help="each session's sandbox (default: process when python is served, else none)")
    ms.add_argument("--input", action="append", metavar="PATH",
                    help="a file every session has (repeatable): images as image_1, …, others for read_file")
    ms.add_argument("--max-sessions", type=int, default=8, metavar="N",
                    help="sessions (each with its sandbox) open at once; more are refused (default 8)")
    ms.add_argument("--session-idle", type=float, default=300.0, metavar="S",
                    help="end an HTTP session with no request for S seconds, closing its sandbox (default 300)")
    ms.set_defaults(fn="mcp:cmd_mcp_serve")

    sv = sub.add_parser("serve", help="serve a local model behind an OpenAI-compatible API on 127.0.0.1")
    sv.add_argument("model", help="local, local:NAME or hf:PATH (any model a spec can name)")
    sv.add_argument("--port", type=_port, default=8000, help="port (default 8000; 0 picks a free one)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    _add_model_arguments(sv, " for every request")
    sv.add_argument("--max-tokens", type=int, metavar="N",
                    help="tokens per answer when a request sets none (default 256)")
    sv.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                    help="a Host name clients may use besides 127.0.0.1, localhost and [::1] (repeatable)")
    sv.add_argument("-q", "--quiet", action="store_true", help="no line per request")
    sv.set_defaults(fn="serve:cmd_serve")

    cu = sub.add_parser("curate", help="score texts or stored runs for training (AskLLM, density, perplexity), "
                                       "keep the best or a covering sample, export a fine-tuning file")
    cu.add_argument("source", metavar="SOURCE", help="runs:FILTER (e.g. runs:status=finished,benchmark=arith,"
                    "score>=1; keys: status, benchmark, eval, model, agent, task, score, limit), a folder of text "
                    "files, or a JSONL file (a string, {\"text\"} or {\"messages\"} per line)")
    cu.add_argument("--score", choices=("askllm", "density", "perplexity"), default="askllm",
                    help="askllm: the proxy model's P(yes) that the text is informative (default); density: its "
                         "kernel density among the texts (MiniLM embeddings); perplexity: the proxy model's mean "
                         "log-likelihood of it (the classic baseline)")
    cu.add_argument("--select", metavar="top:K|fraction:F|density:F",
                    help="keep the K or the share F best, or a share F drawn by inverse density (coverage)")
    cu.add_argument("--min-score", type=float, metavar="X", help="keep only items scoring at least X (before --select)")
    cu.add_argument("--export", metavar="FILE.jsonl", help="write the kept items as a chat fine-tuning file "
                    "(messages with tool calls and tool results; plain texts as {\"text\"})")
    cu.add_argument("--model", default="local", help="the proxy model of askllm and perplexity: local, local:NAME or "
                                                     "hf:PATH (default local)")
    cu.add_argument("--engine", metavar="NAME", help=ENGINE_HELP)
    cu.add_argument("--weights", choices=WEIGHTS, help=WEIGHTS_HELP)
    cu.add_argument("--askllm-shots", metavar="builtin|none|FILE.jsonl",
                    help="worked examples AskLLM's prompt starts with: builtin (default; six answered texts), none "
                         "(the paper's zero-shot prompt) or a JSONL file of {\"text\", \"answer\": yes|no} lines")
    cu.add_argument("--batch-size", type=int, default=8, help="prompts per forward pass on torch (default 8)")
    cu.add_argument("--seed", type=int, default=0, help="the seed of a density sample (default 0)")
    cu.add_argument("--json", action="store_true", help='print {"items": [{"source", "score", "selected"}, ...], ...}')
    cu.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    cu.set_defaults(fn="curate:cmd_curate")

    cp = sub.add_parser("compress", help="write a low-bit (or tailored) copy of a local model that hf:DIR loads")
    cp.add_argument("model", help="local, local:NAME or hf:PATH")
    cp.add_argument("--method", required=True, metavar="M",
                    help="a registered compressor: rtn, gptq, moe-bits, tailor or a plugin's")
    cp.add_argument("--bits", help="bit-width (rtn, gptq: 1-8, default 4; moe-bits: the average)")
    cp.add_argument("--option", action="append", metavar="KEY=VALUE", help="a method option (repeatable)")
    cp.add_argument("--out", required=True, metavar="DIR", help="the folder to write (must not exist, or be empty)")
    cp.add_argument("--json", action="store_true")
    cp.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    cp.set_defaults(fn="compress:cmd_compress")
    return p


def command(target: str):
    """The function a parser's `fn="module:function"` names, its module of this package imported now: a command's
    imports (the spec, the store, models) are paid by the command that runs, never by parsing."""
    from importlib import import_module

    module, _, name = target.partition(":")
    return getattr(import_module(f"{__name__}.{module}"), name)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    problem = _argument_problem(args)
    if problem is not None:
        error(problem)
        return EXIT_BAD_INPUT
    # Imported once a command runs (they all open the store), so `toolpath --help` does not load it.
    import sqlite3

    from ..progress import set_quiet
    from ..registry import RegistryError
    from ..runs import StoreError

    set_quiet(getattr(args, "quiet", False))  # every long job's progress (toolpath/progress.py) follows -q
    try:
        return command(args.fn)(args)
    except (BadInput, RegistryError) as err:  # RegistryError: an unknown name, a plugin that cannot load
        error(str(err))
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader went away (`toolpath runs list | head`): nothing more to say
        sys.stdout = open(os.devnull, "w")  # so the interpreter's final flush does not fail again
        return EXIT_OK
    except StoreError as err:  # TOOLPATH_DB names no reachable PostgreSQL server (the message names it)
        error(str(err))
        return EXIT_FAILED
    except sqlite3.DatabaseError as err:  # a locked, full or damaged run store: say which file
        from pathlib import Path

        from ..runs import default_home

        error(f"run store {Path(args.home) if args.home else default_home()}/runs.db: {err}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        error("interrupted; `toolpath resume RUN_ID` continues a run from its last checkpoint")
        return 130

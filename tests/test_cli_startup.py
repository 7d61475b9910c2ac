"""The CLI's start-up: parsing arguments (and so every `--help`) imports no heavy library, every command's
"module:function" resolves, and run, eval and serve read their model flags alike."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolpath.cli import build_parser, command
from toolpath.cli.common import BadInput, model_overrides

ROOT = Path(__file__).resolve().parents[1]

# What parsing must not load: each costs tens to thousands of milliseconds before anything is printed.
HEAVY = ("pydantic", "torch", "transformers", "langgraph", "numpy")


def leaf_commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """Every runnable command line's words (("run",), ("tools", "list"), ...) with its parser, found by walking
    the parser, so a command added later is covered without naming it here."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, child in subs[0].choices.items():
        yield from leaf_commands(child, prefix + (name,))


# Runs in a fresh interpreter: which heavy modules were loaded before any parsing (must be none, or the check
# proves nothing), then after each `--help`, the ones that help newly loaded.
PROBE = """
import json, sys
heavy = json.loads(sys.argv[1])
def loaded():
    return sorted({m.split(".")[0] for m in sys.modules} & set(heavy))
report = {"before": loaded(), "after": {}}
from toolpath.cli import main
for argv in json.loads(sys.argv[2]):
    try:
        main(argv)
    except SystemExit:
        pass
    report["after"][" ".join(argv)] = loaded()
print("REPORT " + json.dumps(report))
"""


def test_every_help_imports_no_heavy_library(tmp_path):
    argvs = [["--help"]] + [[*words, "--help"] for words, _ in leaf_commands(build_parser())]
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), json.dumps(argvs)], capture_output=True,
                       text=True, cwd=ROOT, env={"TOOLPATH_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    line = next((x for x in r.stdout.splitlines() if x.startswith("REPORT ")), None)
    assert line is not None, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads(line.removeprefix("REPORT "))
    assert report["before"] == [], "the interpreter loaded them before the CLI did; the check would prove nothing"
    assert len(report["after"]) == len(argvs) > 10
    first = next(((cmd, mods) for cmd, mods in report["after"].items() if mods), None)
    assert first is None, f"`toolpath {first[0]}` imported {', '.join(first[1])}"


def test_every_command_names_a_function_that_exists():
    leaves = list(leaf_commands(build_parser()))
    assert {"run", "eval", "serve", "compress"} <= {words[0] for words, _ in leaves}
    for words, parser in leaves:
        target = parser.get_default("fn")
        assert isinstance(target, str), f"toolpath {' '.join(words)}: fn must be 'module:function' (imported late)"
        assert callable(command(target)), f"toolpath {' '.join(words)}: {target} is not a function"


FLAGS = ["--kv-cache", "chanmix:2", "--weights", "int4", "--engine", "torch",
         "--decoding", '{"kind": "vcd", "alpha": 0.5}']
EXPECTED = {"kv_cache": "chanmix:2", "weights": "int4", "engine": "torch", "decoding": {"kind": "vcd", "alpha": 0.5}}


@pytest.mark.parametrize("head", [["run", "t.yaml"], ["eval", "arith"], ["serve", "local"]], ids=lambda h: h[0])
def test_run_eval_and_serve_read_model_flags_alike(head):
    parser = build_parser()
    assert model_overrides(parser.parse_args(head + FLAGS)) == EXPECTED
    assert model_overrides(parser.parse_args(head)) == {}  # nothing given: the spec's own options stand
    assert model_overrides(parser.parse_args(head + ["--decoding", "shield"])) == {"decoding": {"kind": "shield"}}
    with pytest.raises(BadInput, match="--decoding"):
        model_overrides(parser.parse_args(head + ["--decoding", "{not json"]))

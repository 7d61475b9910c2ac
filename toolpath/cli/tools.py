"""`toolpath tools list | show | call | calibrate`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .common import EXIT_FAILED, EXIT_OK, BadInput, echo, echo_json, error, one_line, store_from_args


def cmd_tools_list(args) -> int:
    from ..tools.registry import ToolError, load_tools

    try:
        tools = load_tools()
    except ToolError as err:  # a plugin's tool module that cannot be imported: its message names it
        raise BadInput(str(err)) from None
    if args.json:
        echo_json([{"name": t.name, "description": t.description, "cost": t.cost, "quality": t.quality,
                      "timeout": t.timeout, "tags": list(t.tags)} for t in tools.values()])
        return EXIT_OK
    echo(f"{'TOOL':<16} {'COST s':>8} {'QUALITY':>8}  DESCRIPTION")
    for t in sorted(tools.values(), key=lambda t: t.name):
        echo(f"{t.name:<16} {t.cost:>8g} {t.quality:>8.2f}  {one_line(t.description, 80)}")
    return EXIT_OK


def cmd_tools_calibrate(args) -> int:
    """Measure the edit tools on generated sample edits and write the priors table planners read."""
    from ..evals.benchmarks.edits import subtask_samples
    from ..tools.image.calibrate import calibrate
    from ..tools.image.edit_base import edit_tools
    from ..tools.image.priors import load_priors, user_table, write_table

    if args.tasks < 1 or args.repeats < 1:
        raise BadInput("--tasks and --repeats must be at least 1")
    samples = subtask_samples(args.tasks, args.seed)
    tools = edit_tools()
    before = load_priors(tools)

    def progress(i, subtask):
        if not args.json and (i % 10 == 0 or i == len(samples) - 1):
            echo(f"  sample {i + 1}/{len(samples)}: {subtask.label}", file=sys.stderr)

    rows = calibrate(samples, repeats=args.repeats, progress=progress)
    path = write_table(rows, Path(args.out).expanduser() if args.out else user_table())
    if args.json:
        echo_json({"table": str(path), "samples": len(samples), "tools": {
            k: {"cost": p.cost, "cost_min": p.cost_min, "quality": p.quality, "n": p.n} for k, p in rows.items()}})
        return EXIT_OK
    echo(f"{'TOOL':<26} {'STAGE':<11} {'COST s':>8} {'MIN s':>8} {'QUALITY':>8} {'N':>5}  (was cost / quality)")
    for name, p in sorted(rows.items(), key=lambda kv: (tools[kv[0]].stage, kv[0])):
        old = before.get(name)
        was = f"{old.cost:.4g} / {old.quality:.2f}" if old else ""
        echo(f"{name:<26} {tools[name].stage:<11} {p.cost:>8.4f} {p.cost_min:>8.4f} {p.quality:>8.2f} {p.n:>5}  "
             f"({was})")
    unused = sorted(set(tools) - set(rows))
    for name in unused:
        why = tools[name].available()
        echo(f"{name:<26} {tools[name].stage:<11} not measured: {why or 'no sample of its subtask kinds'}")
    echo(f"wrote {path} ({len(samples)} samples from {args.tasks} generated tasks, seed {args.seed})")
    return EXIT_OK


def _tool(name: str):
    from ..tools.registry import ToolError, get_tool

    try:
        return get_tool(name)
    except ToolError as err:
        raise BadInput(str(err)) from None


def cmd_tools_show(args) -> int:
    t = _tool(args.name)
    echo_json({**t.schema(), "cost": t.cost, "quality": t.quality, "timeout": t.timeout}, indent=2)
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


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg")


def cmd_tools_call(args) -> int:
    from pathlib import Path

    from ..spec_molecules import MoleculeError, graph_files, read_graphs
    from ..tools.registry import ToolContext, ToolError

    t = _tool(args.name)
    arguments = _parse_args(args.arg or [], t)
    try:
        t.validate(arguments)
    except ToolError as err:
        raise BadInput(str(err)) from None
    store = store_from_args(args)
    inputs = [Path(p).resolve() for p in args.input or []]
    # Image inputs get the names a run gives its images (image_1, image_2, … in order), for the image tools.
    images = [p for p in inputs if p.suffix.lower() in IMAGE_SUFFIXES]
    audio = [p for p in inputs if p.suffix.lower() in AUDIO_SUFFIXES]  # audio_1, … as in a run, for the speech tools
    try:  # molecule files: graph_1, … (each molecule of a file) as in a run, for the chemistry tools
        graphs = read_graphs(graph_files(inputs), field="")
    except MoleculeError as err:
        raise BadInput(f"--input: {err}") from None
    ctx = ToolContext(run_id="cli", inputs=inputs, save_artifact=store.put_artifact,
                      images={f"image_{i}": p for i, p in enumerate(images, 1)},
                      audio={f"audio_{i}": p for i, p in enumerate(audio, 1)},
                      graphs={m.name: m for m in graphs})
    try:
        result = t.call(arguments, ctx)
    except ToolError as err:
        error(str(err))
        return EXIT_FAILED
    if args.json:
        echo_json({"content": result.content, "artifacts": [a.model_dump() for a in result.artifacts]})
    else:
        echo(result.content)
        for a in result.artifacts:
            echo(f"artifact: {a.path}")
    return EXIT_OK

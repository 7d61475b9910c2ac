"""The fast-slow edit agent as a user runs it: `toolpath run examples/edit.yaml` on a real photograph, every
choice in the run's steps, failed subtasks reported without losing the others, bad instructions and
parameters refused with the reason; `toolpath eval edits` with its metrics; `toolpath tools calibrate`."""

import json
import shutil

import numpy as np
import pytest
from conftest import ROOT, toolpath_cli, write
from PIL import Image

from toolpath.tools.image.features import color_mask

COFFEE = ROOT / "examples" / "assets" / "coffee.jpg"


def run_json(args, home, cwd=None, timeout=300):
    r = toolpath_cli("run", *args, "--json", home=home, cwd=cwd, timeout=timeout)
    return r, json.loads(r.stdout)


def edit_spec(tmp_path, instruction, **params):
    lines = ["id: edit-test", f"instruction: {json.dumps(instruction)}", "inputs:", f"  images: [{COFFEE.name}]",
             "agent:", "  name: fast_slow", f"  params: {json.dumps(params)}"]
    shutil.copyfile(COFFEE, tmp_path / COFFEE.name)  # beside the spec: a spec's files are under its folder
    return write(tmp_path / "edit.yaml", "\n".join(lines) + "\n")


def test_the_example_edits_the_photo_and_saves_it(tmp_path, home):
    example = tmp_path / "examples"  # a copy: the example writes its output beside itself
    shutil.copytree(ROOT / "examples", example, ignore=lambda d, names: [n for n in names if n not in (
        "edit.yaml", "assets", COFFEE.name)])
    r, out = run_json([example / "edit.yaml"], home, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert out["status"] == "finished"
    answer = json.loads(out["answer"])
    saved = example / "edited_coffee.png"  # agent.params.output, relative to the spec's folder
    assert answer["output"] == str(saved.resolve()) and saved.is_file()
    before = np.asarray(Image.open(COFFEE).convert("RGB"))
    after = np.asarray(Image.open(saved).convert("RGB"))
    assert after.shape == before.shape
    assert np.array_equal(after, np.asarray(Image.open(answer["image"]).convert("RGB")))
    # the red crockery went blue: the photo has no blue, the result has a cup-sized blue region
    assert color_mask(before, "blue").mean() < 0.001
    assert color_mask(after, "blue").mean() > 0.05
    # 'ESPRESSO' was drawn in the top-right cell: new dark or light ink there, nothing drawn bottom-left
    h, w = before.shape[:2]
    diff = np.abs(after.astype(int) - before.astype(int)).sum(-1) > 60
    assert diff[: h // 3, 2 * w // 3:].mean() > 0.02
    assert [s["ok"] for s in answer["subtasks"]] == [True, True]
    assert answer["tool_calls"] == sum(s["tool_calls"] for s in answer["subtasks"])

    # every choice is in the run's steps: the chain, and per subtask its route, toolpath and search numbers
    shown = json.loads(toolpath_cli("runs", "show", out["run_id"], "--json", home=home).stdout)
    steps = shown["steps"]
    assert [s["node"] for s in steps if s["node"] in ("plan", "tools")] == ["plan", "tools", "tools"]
    text = toolpath_cli("runs", "show", out["run_id"], home=home).stdout
    assert "Object Recoloration (red cup → blue cup)" in text and "Text Addition ('ESPRESSO' at top right)" in text
    assert "A*:" in text and "expansions" in text and "features:" in text


def test_a_subtask_that_cannot_be_done_is_reported_and_the_rest_is_kept(tmp_path, home):
    spec = edit_spec(tmp_path, "remove the green star, then add the text 'HOT' at the bottom left",
                     output=str(tmp_path / "out.png"), learn=False)
    r, out = run_json([spec], home)
    answer = json.loads(out["answer"])
    assert out["status"] == "finished" and r.returncode == 0
    assert "Object Removal (green star)" in out["error"]  # the failed subtask is named
    first, second = answer["subtasks"]
    assert not first["ok"] and "green" in first.get("error", "") + json.dumps(first)
    assert second["ok"]
    after = np.asarray(Image.open(tmp_path / "out.png").convert("RGB"))
    before = np.asarray(Image.open(COFFEE).convert("RGB"))
    h, w = before.shape[:2]
    diff = np.abs(after.astype(int) - before.astype(int)).sum(-1) > 60
    assert diff[2 * h // 3:, : w // 3].mean() > 0.01 and diff[: h // 3].mean() == 0  # only the text changed


def test_an_instruction_outside_the_grammar_fails_with_the_reason(tmp_path, home):
    r, out = run_json([edit_spec(tmp_path, "make it look nicer")], home)
    assert r.returncode == 1 and out["status"] == "failed"
    assert "instruction" in r.stdout + r.stderr


def test_bad_parameters_are_refused_by_name_before_the_run_starts(tmp_path, home):
    spec = edit_spec(tmp_path, "recolor the red cup blue", alpha=5, fast="no")
    r = toolpath_cli("run", spec, "--json", home=home, timeout=300)
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert f"{spec}: agent.params.alpha: Input should be less than or equal to 2 (got 5)" in r.stderr
    assert "agent.params.fast: Input should be a valid boolean (got 'no')" in r.stderr and "Traceback" not in r.stderr
    assert toolpath_cli("runs", "list", "--json", home=home).stdout.strip() in ("", "[]")  # nothing was recorded


def test_eval_edits_reports_subtask_success_cost_and_quality(home):
    r = toolpath_cli("eval", "edits", "--limit", "4", "--json", home=home, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["benchmark"] == "edits" and out["n"] == 4
    m = out["metrics"]
    assert set(m) >= {"subtask_success", "cost_s", "tool_calls", "quality"}
    assert 0.0 <= m["subtask_success"] <= 1.0 and m["cost_s"] > 0 and m["tool_calls"] >= 1
    assert out["score"] <= m["subtask_success"]  # a task passes only when all its subtasks do
    human = toolpath_cli("eval", "edits", "--limit", "2", home=home, timeout=300).stdout
    assert "subtask_success" in human and "cost_s" in human


def test_calibrate_writes_the_priors_table_planners_read(tmp_path, home):
    r = toolpath_cli("tools", "calibrate", "--tasks", "3", "--json", home=home, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    table = home / "priors" / "edit_tools.json"
    assert out["table"] == str(table) and table.is_file()
    rows = json.loads(table.read_text())["tools"]
    for name in ("color_segment", "recolor_hsv", "write_text"):
        row = rows.get(name)
        if row is not None:
            assert row["n"] >= 1 and 0 < row["cost_min"] <= row["cost"] and 0 <= row["quality"] <= 1
    assert rows  # something was measured

    from toolpath.tools.image.edit_base import edit_tools
    from toolpath.tools.image.priors import load_priors

    priors = load_priors(edit_tools())  # TOOLPATH_HOME is this test's home: the new table wins
    name = next(iter(rows))
    assert priors[name].cost == pytest.approx(rows[name]["cost"], rel=1e-3)

    assert toolpath_cli("tools", "calibrate", "--tasks", "0", home=home).returncode == 2

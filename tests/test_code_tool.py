"""The python tool through whole episodes: a sandbox per episode, task images preloaded, DeepEyesV2's template."""

import json

import pytest
from conftest import ROOT, toolpath_cli

from toolpath.agents.episode import EpisodeError, run_episode
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.sandboxes.process import CellResult, bwrap_works
from toolpath.spec import parse_spec
from toolpath.tools.code import format_result

REASON = bwrap_works()
needs_bwrap = pytest.mark.skipif(REASON is not None, reason=f"no bubblewrap sandbox here: {REASON}")


def code(src):
    return {"tool_calls": [{"name": "python", "arguments": {"code": src}}]}


@needs_bwrap
def test_example_task_crops_and_measures_an_image_through_the_cli(home):
    r = toolpath_cli("run", ROOT / "examples" / "measure_bars.yaml", "--json", home=home)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["status"], out["answer"], out["score"]) == ("finished", "137", 1.0)
    from toolpath.runs import Store

    steps = Store(home).steps(out["run_id"])
    obs = steps[2]["payload"]["observations"][0]
    assert obs["content"].startswith("Code execution result:\nstdout:\n(320, 200)")
    assert "value:\n137" in obs["content"] and "Images: 1" in obs["content"]
    crop = obs["artifacts"][0]
    assert crop["mime"] == "image/png" and crop["path"].startswith(str(home / "artifacts"))


@needs_bwrap
def test_state_persists_within_an_episode_and_not_across(store):
    s = parse_spec({"id": "t", "instruction": "x", "model": "scripted:x", "sandbox": "process"})
    r1 = run_episode(s, store, policy=ScriptedPolicy([code("v = 7"), code("v * 6"), "done"]))
    assert "value:\n42" in store.steps(r1.run_id)[4]["payload"]["messages"][0]["content"]
    r2 = run_episode(s, store, policy=ScriptedPolicy([code("v"), "done"]))
    assert "NameError" in store.steps(r2.run_id)[2]["payload"]["messages"][0]["content"]


def test_python_needs_a_sandbox(store):
    s = parse_spec({"id": "t", "instruction": "x", "model": "scripted:x", "tools": ["python"]})
    r = run_episode(s, store, policy=ScriptedPolicy([code("1"), "done"]))
    obs = store.steps(r.run_id)[2]["payload"]["observations"][0]
    assert obs["error"] and "set `sandbox: process`" in obs["content"]


def test_bad_sandbox_options_fail_before_the_run(store):
    s = parse_spec({"id": "t", "instruction": "x", "model": "scripted:x",
                    "sandbox": {"kind": "process", "options": {"memory": 5}}})
    with pytest.raises(EpisodeError, match="sandbox.options.memory: sandbox 'process' has no option 'memory'; its "
                                           "options: cpu_seconds, memory_mb, .*, isolation"):
        run_episode(s, store, policy=ScriptedPolicy([]))
    assert store.list_runs() == []


@pytest.mark.parametrize("options, field", [({"memory_mb": -5}, "memory_mb"), ({"disk_mb": "big"}, "disk_mb"),
                                            ({"isolation": "vm"}, "isolation")])
def test_bad_sandbox_limits_fail_before_the_run(store, options, field):
    s = parse_spec({"id": "t", "instruction": "x", "model": "scripted:x",
                    "sandbox": {"kind": "process", "options": options}})
    with pytest.raises(EpisodeError, match=f"^sandbox.options.{field}: .* \\(got {options[field]!r}\\)$"):
        run_episode(s, store, policy=ScriptedPolicy([]))
    assert store.list_runs() == []


@needs_bwrap
def test_the_task_inputs_are_copied_into_the_sandboxs_own_folder(tmp_path, store):
    from PIL import Image

    Image.new("RGB", (4, 3)).save(tmp_path / "pic.png")
    s = parse_spec({"id": "t", "instruction": "x", "model": "scripted:x", "sandbox": "process",
                    "inputs": {"images": ["pic.png"]}}, base_dir=tmp_path)
    script = [code("import os\n(image_1.size, sorted(os.listdir('/episode/inputs')))"), "done"]
    r = run_episode(s, store, policy=ScriptedPolicy(script))
    obs = store.steps(r.run_id)[2]["payload"]["observations"][0]["content"]
    assert "value:\n((4, 3), ['pic.png'])" in obs


def test_observation_template():
    text = format_result(CellResult(stdout="hi\n", value="3", error="Traceback…\nValueError: x", notes=["restarted"]))
    assert text == ("Code execution result:\nstdout:\nhi\nvalue:\n3\nstderr:\nTraceback…\nValueError: x\nImages: 0\n"
                    "note: restarted")

"""Capability tools: whole agents nested in the caller's run — recorded as a tree, within the caller's budget,
resumed after kill -9 without redoing finished nested steps, and bad arguments named."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, toolpath_cli, write_old_runs_table

from toolpath.agents.episode import EpisodeError, resume_episode, run_episode
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.runs import Store
from toolpath.sandboxes.process import bwrap_works
from toolpath.spec import parse_spec

needs_kernel = pytest.mark.skipif(bwrap_works() is not None, reason=f"no bubblewrap sandbox: {bwrap_works()}")
ROOMS = [str(ROOT / "examples" / "assets" / f"room_{i}.jpg") for i in (1, 2)]
COFFEE = str(ROOT / "examples" / "assets" / "coffee.jpg")
QUESTION = "Between image 1 and image 2, which way did the camera turn? A. left B. right C. it did not turn."
PROGRAM = ("```python\ndef program(scene):\n    recon = reconstruct(scene)\n"
           "    return describe_camera_motion(recon, 0, 1)\n```")


def ask_spatial(images=("image_1", "image_2")):
    return {"text": "asking", "tool_calls": [{"name": "spatial_query",
                                              "arguments": {"question": QUESTION, "images": list(images)}}]}


def final(answer):
    return {"text": "done", "tool_calls": [{"name": "final_answer", "arguments": {"answer": answer}}]}


def spec(images=ROOMS, tools=("spatial_query", "edit_image", "gui_task", "robot_task", "final_answer"), **extra):
    return parse_spec({"id": "nest", "instruction": "Which way did the camera turn?", "inputs": {"images": images},
                       "model": "scripted:none.yaml", "tools": list(tools), **extra})


def observations(store, run_id):
    return [o for s in store.steps(run_id) for o in s["payload"].get("observations", [])]


@needs_kernel
def test_a_nested_run_is_recorded_under_the_step_that_called_it_and_shown_as_a_tree(store, home):
    script = [ask_spatial(), PROGRAM, '{"reasoning": "right", "answer": "B"}', final("right")]
    r = run_episode(spec(), store, policy=ScriptedPolicy(script))
    assert (r.status, r.answer) == ("finished", "right")
    [child] = store.child_runs(r.run_id)
    assert (child["agent"], child["status"], child["answer"], child["parent_seq"]) == ("visual_program", "finished",
                                                                                         "B", 2)
    assert child["steps"] == 2 and r.steps == 4  # the nested policy steps count as the caller's
    assert r.tokens == sum(s["tokens_in"] + s["tokens_out"] for run in (r.run_id, child["id"])
                           for s in store.steps(run))
    obs = observations(store, r.run_id)[0]
    assert obs["tool"] == "spatial_query" and "answer: B" in obs["content"] and not obs.get("error")
    assert [x["id"] for x in store.list_runs()] == [r.run_id]  # nested runs are listed under their parent only
    assert store.find_run(r.run_id[:15])["id"] == r.run_id  # a prefix still names the parent alone
    shown = toolpath_cli("runs", "show", r.run_id, home=home)
    assert shown.returncode == 0, shown.stderr
    assert f"┌ nested run {child['id']}  agent visual_program  status finished" in shown.stdout
    assert "  │ [1] policy" in shown.stdout and "describe_camera_motion" in shown.stdout
    tree = json.loads(toolpath_cli("runs", "show", r.run_id, "--json", home=home).stdout)
    assert tree["nested"][0]["run"]["id"] == child["id"] and len(tree["nested"][0]["steps"]) == 4
    with pytest.raises(EpisodeError, match="resume that one"):
        resume_episode(child["id"], store)


@needs_kernel
def test_a_nested_run_gets_only_what_the_caller_has_left_and_its_use_is_counted(store):
    # max_steps 2: the caller's first step leaves one for the nested agent, which needs two (program, answer).
    script = [ask_spatial(), PROGRAM, '{"answer": "B"}', final("never")]
    r = run_episode(spec(limits={"max_steps": 2}), store, policy=ScriptedPolicy(script))
    [child] = store.child_runs(r.run_id)
    assert child["status"] == "budget_exhausted" and child["steps"] == 1
    assert json.loads(child["spec"])["limits"]["max_steps"] == 1
    obs = observations(store, r.run_id)[0]
    assert obs["error"] and "budget_exhausted after 1 step" in obs["content"]
    assert (r.status, r.steps) == ("budget_exhausted", 2)


def test_edit_image_returns_the_edited_image_as_a_new_named_image(store):
    script = [{"text": "edit", "tool_calls": [{"name": "edit_image", "arguments": {
        "instruction": "recolor the red cup blue", "image": "image_1"}}]}, {}, {}, final("edited_1")]
    r = run_episode(spec(images=[COFFEE]), store, policy=ScriptedPolicy(script))
    assert r.status == "finished", r.error
    [child] = store.child_runs(r.run_id)
    assert child["agent"] == "fast_slow" and child["status"] == "finished"
    obs = observations(store, r.run_id)[0]
    assert "image: edited_1" in obs["content"] and obs["artifacts"][0]["name"] == "edited_1.png"
    # the viewer shows the tree: the parent lists its nested run, the nested run links back; the index
    # lists the parent only
    from urllib.request import urlopen

    from toolpath.viewer.server import serve

    server, url = serve(store.home, port=0)
    try:
        page = urlopen(f"{url}/runs/{r.run_id}").read().decode()
        assert "<h2>Nested runs</h2>" in page and f"/runs/{child['id']}" in page and "fast_slow" in page
        page = urlopen(f"{url}/runs/{child['id']}").read().decode()
        assert "nested in" in page and f"/runs/{r.run_id}'" in page
        index = urlopen(url + "/").read().decode()
        assert f">{r.run_id}<" in index and f">{child['id']}<" not in index
    finally:
        server.shutdown()
        server.server_close()


def test_bad_capability_arguments_are_error_observations_naming_what_is_wrong(store):
    calls = [("spatial_query", {"question": QUESTION, "images": ["image_9"]}),
             ("spatial_query", {"question": QUESTION}),
             ("edit_image", {"instruction": "remove the logo", "image": "crop_2"}),
             ("gui_task", {"instruction": "click OK"}),
             ("robot_task", {"instruction": "put the cube on the plate"}),
             ("robot_task", {"instruction": "   "}),
             ("spatial_query", {"question": QUESTION, "images": ["image_1"], "depth": 3})]
    script = [{"text": "", "tool_calls": [{"name": n, "arguments": a}]} for n, a in calls] + [final("x")]
    r = run_episode(spec(limits={"loop_repeats": 9}), store, policy=ScriptedPolicy(script))
    got = [o["content"] for o in observations(store, r.run_id)][:len(calls)]
    assert "unknown image(s) 'image_9'; images in this episode: image_1, image_2" in got[0]
    assert "bad arguments" in got[1] and "images" in got[1]
    assert "unknown image(s) 'crop_2'" in got[2]
    assert "gui_task: needs the episode's sandbox to be browser or desktop; this run's is none" in got[3]
    assert "robot_task: needs the episode's sandbox to be robot; this run's is none" in got[4]
    assert "robot_task: the instruction is empty" in got[5]
    assert "bad arguments" in got[6] and "depth" in got[6]
    assert store.child_runs(r.run_id) == [] and r.status == "finished"


def test_a_capability_called_outside_an_agent_says_so():
    from toolpath.tools.registry import ToolContext, ToolError, get_tool

    with pytest.raises(ToolError, match="call it from an agent's step"):
        get_tool("robot_task").call({"instruction": "pick"}, ToolContext())


def test_an_older_store_gets_the_nesting_columns_and_reads_without_them(home):
    conn = write_old_runs_table(home, pid=True)  # as written before nesting
    conn.execute("INSERT INTO runs VALUES ('old-1', 't', '{}', 'm', 'react', 'finished', 'a', NULL, NULL, 1, 0, 0, "
                 "0, NULL, NULL, 1, 1)")
    conn.commit()
    conn.close()
    old = Store(home, readonly=True)  # read-only: no migration, and nothing nested to show
    assert [r["id"] for r in old.list_runs()] == ["old-1"] and old.child_runs("old-1") == []
    old.close()
    with Store(home) as s:
        assert s.get_run("old-1")["parent_id"] is None
        s.create_run("{}", "t", "m", "react", "old-1.2.1", parent=("old-1", 2))
        assert [r["id"] for r in s.child_runs("old-1")] == ["old-1.2.1"]
        assert [r["id"] for r in s.list_runs()] == ["old-1"]


@needs_kernel
def test_kill_9_inside_a_nested_run_then_resume_redoes_no_finished_nested_step(tmp_path, home):
    # The nested agent's answer step waits 4 s; the process is killed there, after its program step committed.
    script = [ask_spatial(), PROGRAM, {"text": '{"answer": "B"}', "delay": 4.0}, final("right")]
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(script))
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({
        "id": "nest-kill", "instruction": "Which way did the camera turn?", "inputs": {"images": ROOMS},
        "model": "scripted:r.yaml", "tools": ["spatial_query", "final_answer"]}))
    env = {**os.environ, "TOOLPATH_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "run", str(tmp_path / "t.yaml"),
                             "--allow-path", str(Path(ROOMS[0]).parent)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        child, before = None, []
        for _ in range(600):
            time.sleep(0.05)
            if (home / "runs.db").exists():
                with Store(home, readonly=True) as s:
                    runs = s.list_runs()
                    child = s.child_runs(runs[0]["id"]) if runs else []
                    before = s.steps(child[0]["id"]) if child else []
            if len(before) >= 3:  # task, program, its run: the answer step is now waiting
                break
        assert len(before) == 3, "the nested run did not reach its answer step"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    parent_id = child[0]["parent_id"]
    r = toolpath_cli("resume", parent_id, home=home)
    assert r.returncode == 0, r.stderr
    with Store(home, readonly=True) as s:
        after = s.steps(child[0]["id"])
        assert [x["started"] for x in after[:3]] == [x["started"] for x in before]  # not redone
        assert [x["node"] for x in after] == ["task", "policy", "tools", "policy"]
        assert s.get_run(child[0]["id"])["status"] == "finished"
        run = s.get_run(parent_id)
        assert (run["status"], run["answer"], run["steps"]) == ("finished", "right", 4)
        assert len(s.child_runs(parent_id)) == 1


def test_two_capability_calls_in_one_step_follow_each_other_in_budget_and_names(store):
    edits = [{"name": "edit_image", "arguments": {"instruction": "recolor the red cup blue", "image": "image_1"}},
             {"name": "edit_image", "arguments": {"instruction": "make the background white", "image": "edited_1"}}]
    # step 1 calls both; each edit agent counts 2 steps (2-3, 4-5); the caller's next step is 6
    script = [{"text": "two edits", "tool_calls": edits}, {}, {}, {}, {}, final("edited_2")]
    r = run_episode(spec(images=[COFFEE]), store, policy=ScriptedPolicy(script))
    assert (r.status, r.answer, r.steps) == ("finished", "edited_2", 6), r.error
    first, second = store.child_runs(r.run_id)
    assert (first["id"], second["id"]) == (f"{r.run_id}.2.1", f"{r.run_id}.2.2")
    assert json.loads(second["spec"])["limits"]["max_steps"] == json.loads(first["spec"])["limits"]["max_steps"] - 2
    assert [o["content"].splitlines()[-1] for o in observations(store, r.run_id)[:2]] == ["image: edited_1",
                                                                                          "image: edited_2"]


def test_the_examples_load_and_edit_then_upload_runs_end_to_end(home):
    import importlib.util

    from toolpath.sandboxes.browser import chromium_path
    from toolpath.spec import load_spec

    for name in ("turn_then_place", "edit_then_upload", "turn_graph"):
        load_spec(ROOT / "examples" / f"{name}.yaml")
    if importlib.util.find_spec("playwright") is None or chromium_path() is None:
        pytest.skip("no Playwright or Chromium for the browser sandbox")
    r = toolpath_cli("run", ROOT / "examples" / "edit_then_upload.yaml", home=home)
    assert r.returncode == 0, r.stderr
    with Store(home, readonly=True) as s:
        [run] = s.list_runs()
        edit, gui = s.child_runs(run["id"])
        assert (edit["agent"], edit["status"], gui["agent"], gui["status"]) == ("fast_slow", "finished",
                                                                                "computer_use", "finished")
        text = json.dumps([x["payload"] for x in s.steps(gui["id"])])
        assert "a file chooser opened; chose edited_1.png" in text
        # the page shows what was uploaded at (40, 300): the screenshot's dark header where the red logo was
        from PIL import Image

        shot = next(o for o in observations(s, run["id"]) if o["tool"] == "gui_task")["artifacts"][0]["path"]
        r, g, b = Image.open(shot).convert("RGB").getpixel((40 + 30, 300 + 24))
        assert max(r, g, b) < 100 and abs(r - b) < 30, (r, g, b)

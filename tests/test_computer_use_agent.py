"""The computer-use agent's loop: prompt layout, coordinate conversion, bad lines, ending actions, final state.

The screen here is a small in-process stand-in (a unit test of the agent around the sandbox); the real
browser and X display have their own tests (test_browser_sandbox.py, test_desktop_sandbox.py).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, toolpath_cli
from PIL import Image

from toolpath import registry
from toolpath.agents.computer_use import MAX_OPERATION_CHARS
from toolpath.agents.episode import EpisodeError, run_episode
from toolpath.evals.scoring import recorded_final_state as final_state
from toolpath.runs import Store, pid_alive
from toolpath.sandboxes.base import SandboxError, SandboxOptions
from toolpath.spec import parse_spec


class ScreenOptions(SandboxOptions):
    fail_on: str | None = None  # the action that fails as a SandboxError


class Screen:
    """A 1280x720 screen that records what was done to it."""

    Options = ScreenOptions
    platform = "web"
    log: list = []

    def __init__(self, limits, fail_on=None):
        self.fail_on = fail_on
        self.url = "http://127.0.0.1:1/page"
        Screen.log = []

    def start(self):
        return self

    def close(self):
        Screen.log.append(("closed", {}))

    def screen_size(self):
        return 1280, 720

    def screenshot(self):
        buf = io.BytesIO()
        Image.new("RGB", (1280, 720), "white").save(buf, "PNG")
        return buf.getvalue()

    def observe(self):
        return {"url": self.url, "title": "Form", "elements": [
            {"id": 1, "tag": "button", "role": "", "text": "Save", "box": [600, 340, 680, 380]}]}

    def act(self, action, args, deadline=None):
        if action == self.fail_on:
            raise SandboxError(f"{action}: no such key")
        Screen.log.append((action, args))
        return f"{action} done"

    def goto(self, url):
        self.url = url

    def evaluate(self, js):
        if js == "boom":
            raise SandboxError("ReferenceError: boom is not defined")
        return {"js": js, "url": self.url}


class Seen:
    """A policy that replays replies and keeps the prompts it was given."""

    name = "seen"

    def __init__(self, replies, observes=("screenshot",)):
        self.replies, self.prompts, self.observes = list(replies), [], observes

    def respond(self, messages, tools, **gen):
        from toolpath.policies.base import Response

        self.prompts.append(messages)
        raw = self.replies.pop(0)
        p = gen["format"].parse(raw)
        return Response(text=p.content, tool_calls=p.calls, issues=p.issues, raw=raw)


@pytest.fixture
def screen():
    registry.add("sandbox", "browser", Screen)
    yield Screen
    registry.reset()  # the built-in browser again


def spec(tmp_path, **over):
    data = {"id": "cua", "instruction": "Save the form", "agent": {"name": "computer_use", "params": {}},
            "sandbox": {"kind": "browser"}, "model": "scripted:unused.yaml", **over}
    return parse_spec(data, base_dir=tmp_path)


def test_direct_mode_converts_coordinates_and_runs_every_good_line(tmp_path, screen):
    policy = Seen(["<operation>Click Save</operation><action>click(x=0.5, y=0.5)\nclick(x=5 y=6)\n"
                   "press('enter')</action>",
                   "<operation>Done</operation><action>terminate(status='success')</action>"])
    s = spec(tmp_path, agent={"name": "computer_use", "params": {"coordinates": "normalized"}})
    with Store(tmp_path / "home") as store:
        res = run_episode(s, store, policy=policy)
        steps = store.steps(res.run_id)
    assert res.status == "finished" and res.answer == "success"
    assert screen.log[:2] == [("click", {"x": 640, "y": 360, "clicks": 1, "button": "left"}),
                              ("press", {"keys": ["enter"], "presses": 1})]
    assert screen.log[-1] == ("closed", {})
    # The second prompt tells the model about its bad line and lists its history as ScaleCUA does.
    second = policy.prompts[1][1].content
    assert "Step 1: Click Save" in second and "click(x=5 y=6)" in second and "the others ran" in second
    assert policy.prompts[1][1].images and policy.prompts[1][1].images[0].mime == "image/png"
    assert "fractions of the screenshot" in policy.prompts[0][0].content
    acts = [s for s in steps if s["node"] == "act"]
    assert "screen (640, 360)" in acts[0]["payload"]["observations"][0]["content"]
    assert [s["node"] for s in steps][:4] == ["task", "observe", "policy", "act"]


def test_off_screen_points_and_sandbox_errors_go_back_to_the_model(tmp_path, screen):
    policy = Seen(["<operation>a</operation><action>click(x=5000, y=10)\npress('nokey')\nwrite(message='hi')</action>",
                   "<action>response(answer='42')</action>"])
    s = spec(tmp_path, sandbox={"kind": "browser", "options": {"fail_on": "press"}})
    with Store(tmp_path / "home") as store:
        res = run_episode(s, store, policy=policy)
    assert res.status == "finished" and res.answer == "42"
    assert screen.log[0] == ("write", {"message": "hi"})  # the good line ran
    feedback = policy.prompts[1][1].content
    assert "x=5000 is outside the screenshot" in feedback and "no such key" in feedback


def test_a_flood_of_failing_lines_and_a_huge_operation_are_kept_short_in_the_next_prompt(tmp_path, screen):
    lines = "\n".join(f"click(x={5000 + i}, y=10)" for i in range(50))
    policy = Seen([f"<operation>{'o' * 5000}</operation><action>{lines}</action>",
                   "<action>terminate()</action>"])
    with Store(tmp_path / "home") as store:
        res = run_episode(spec(tmp_path), store, policy=policy)
    assert res.status == "finished"
    second = policy.prompts[1][1].content
    assert "x=5000 is outside" in second and "x=5019 is outside" in second and "x=5020" not in second
    assert "… and 30 more" in second
    assert "Step 1: " + "o" * MAX_OPERATION_CHARS + "… (4000 more characters)" in second


def test_dom_observing_policies_get_elements_in_their_coordinates(tmp_path, screen):
    policy = Seen(["<action>terminate(status='failure', info='cannot')</action>"], observes=("screenshot", "dom"))
    s = spec(tmp_path, agent={"name": "computer_use", "params": {"coordinates": "grid1000"}})
    with Store(tmp_path / "home") as store:
        res = run_episode(s, store, policy=policy)
    assert res.status == "failed" and "cannot" in res.error
    lines = [json.loads(x) for x in policy.prompts[0][1].content.splitlines() if x.startswith("{")]
    assert lines[0]["text"] == "Save" and lines[0]["box"] == [469, 473, 531, 527]


def test_final_state_holds_the_probes_evaluated_in_the_live_page(tmp_path, screen):
    policy = Seen(["<action>terminate()</action>"])
    s = spec(tmp_path, evaluator={"name": "exact", "options": {"probes": [
        {"url": "last", "js": "document.title"}, {"url": "http://127.0.0.1:1/other", "js": "1"},
        {"url": "last", "js": "boom"}]}})
    with Store(tmp_path / "home") as store:
        res = run_episode(s, store, policy=policy)
        final = final_state(store, res.run_id)
    assert final["url"] == "http://127.0.0.1:1/page"
    assert final["probes"][0]["value"] == {"js": "document.title", "url": "http://127.0.0.1:1/page"}
    assert final["probes"][1]["value"]["url"] == "http://127.0.0.1:1/other"
    assert "boom is not defined" in final["probes"][2]["error"]


def test_grounding_answers_a_point_in_image_pixels_or_declines(tmp_path):
    img = tmp_path / "shot.png"
    Image.new("RGB", (1920, 1080), "white").save(img)
    base = {"id": "g", "instruction": "the Save button", "inputs": {"images": [str(img)]},
            "agent": {"name": "computer_use", "params": {"mode": "grounding", "coordinates": "grid1000"}}}
    for reply, expect in [("(500, 250)", {"point": [960, 270], "action": "click"}),
                          ("<action>terminate(status='failure', info='not there')</action>",
                           {"refused": True, "reason": "not there"}),
                          ("I do not see it", None)]:
        policy = Seen([reply])
        with Store(tmp_path / "home") as store:
            res = run_episode(parse_spec(base, base_dir=tmp_path), store, policy=policy)
        assert res.status == "finished"
        answer = json.loads(res.answer)
        if expect is None:
            assert answer["refused"] and "no <action>" in answer["reason"]
        else:
            assert answer == expect


def test_action_modes_need_a_screen(tmp_path):
    s = parse_spec({"id": "x", "instruction": "do it", "agent": {"name": "computer_use", "params": {"mode": "direct"}},
                    "model": "scripted:r.yaml"}, base_dir=tmp_path)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(["<action>terminate()</action>"]))
    with Store(tmp_path / "home") as store, pytest.raises(EpisodeError, match="set sandbox to browser or desktop"):
        run_episode(s, store, policy=Seen([]))
    for params, msg in [({"mode": "fast"}, "agent.params.mode: Input should be 'grounding', 'direct' or 'reasoned'"),
                        ({"coordinates": "px"}, "agent.params.coordinates: Input should be 'absolute'"),
                        ({"min_pixels": 10_000, "max_pixels": 100}, "min_pixels .10000. is above max_pixels"),
                        ({"history": -1}, "agent.params.history: Input should be greater than or equal to 0")]:
        with pytest.raises(EpisodeError, match=msg), Store(tmp_path / "home") as store:
            run_episode(parse_spec({"id": "x", "instruction": "i", "agent": {"name": "computer_use",
                                                                             "params": params}}), store)
    with pytest.raises(EpisodeError, match="agent.params.speed: agent 'computer_use' has no option 'speed'; its "
                                           "options: mode, platform, coordinates, min_pixels, max_pixels, history"):
        with Store(tmp_path / "home") as store:
            run_episode(parse_spec({"id": "x", "instruction": "i", "agent": {"name": "computer_use",
                                                                             "params": {"speed": 1}}}), store)


# ---- a scripted policy: response n at step n ---------------------------------------------------------------

def test_a_scripted_policy_replays_one_response_per_step(tmp_path, screen):
    """The agent rebuilds its prompt every step (ScaleCUA's layout), so the turn cannot be counted from the
    conversation: the scripted policy answers step n with response n. (Old: step 2 replayed response 1, and
    the same click three times ended the run as looping.)"""
    replies = ["<operation>first</operation><action>click(x=0.1, y=0.1)</action>",
               "<operation>second</operation><action>click(x=0.2, y=0.2)</action>",
               "<operation>third</operation><action>write(message='done')</action>",
               "<action>terminate(status='success')</action>"]
    (tmp_path / "replies.yaml").write_text(yaml.safe_dump(replies))
    s = spec(tmp_path, model="scripted:replies.yaml", agent={"name": "computer_use",
                                                             "params": {"coordinates": "normalized"}})
    with Store(tmp_path / "home") as store:
        res = run_episode(s, store)
        raws = [st["payload"]["raw"] for st in store.steps(res.run_id) if st["node"] == "policy"]
    assert res.status == "finished" and res.answer == "success" and res.steps == 4
    assert raws == replies
    assert screen.log == [("click", {"x": 128, "y": 72, "clicks": 1, "button": "left"}),
                          ("click", {"x": 256, "y": 144, "clicks": 1, "button": "left"}),
                          ("write", {"message": "done"}), ("closed", {})]


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), children first."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def wait_for_acts(home, count: int, proc, timeout: float = 60.0) -> str:
    """The id of the one run in `home` once `count` of its act steps are stored (the run is still going)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (home / "runs.db").exists():
            with Store(home) as store:
                runs = store.list_runs()
                if runs and sum(s["node"] == "act" for s in store.steps(runs[0]["id"])) >= count:
                    return runs[0]["id"]
        assert proc.poll() is None, "the run ended before it could be killed: " + proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError(f"no {count} act steps within {timeout:g} s")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("Xvfb") is None or importlib.util.find_spec("pyautogui") is None,
                    reason="needs Xvfb and pyautogui")
def test_kill_9_then_resume_carries_on_with_the_next_scripted_response(tmp_path):
    """`toolpath run` on a real X display, killed after its second action; `toolpath resume` must go on
    with the next response, not start the script over (the step comes from the checkpoint, not the prompt)."""
    xs = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    replies = [{"text": f"move to {x}", "tool_calls": [{"name": "moveTo", "arguments": {"x": x, "y": 0.5}}],
                "delay": 0.3} for x in xs] + [{"tool_calls": [{"name": "terminate", "arguments": {}}]}]
    (tmp_path / "replies.yaml").write_text(yaml.safe_dump(replies))
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump({"id": "moves", "instruction": "move", "model": "scripted:replies.yaml",
                                    "agent": {"name": "computer_use", "params": {"coordinates": "normalized"}},
                                    "sandbox": {"kind": "desktop"}, "limits": {"max_steps": 10}}))
    home = tmp_path / "home"
    env = {**os.environ, "TOOLPATH_HOME": str(home),
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "run", str(task), "--json"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_id = wait_for_acts(home, 2, proc)
    finally:
        orphans = descendants(proc.pid)  # its Xvfb outlives a kill -9, until the next desktop sandbox starts
        proc.kill()
        proc.wait(timeout=10)
    try:
        r = toolpath_cli("resume", run_id, "--json", home=home, cwd=tmp_path, timeout=120)
        assert orphans and not [pid for pid in orphans if pid_alive(pid)]  # the resumed run's start swept them
    finally:
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "finished" and out["answer"] == "success"
    with Store(home) as store:
        steps = store.steps(run_id)
    moved = [float(m.group(1)) for s in steps if s["node"] == "act" for o in s["payload"]["observations"]
             for m in [re.search(r"\[\(([\d.]+), 0\.5\) → screen", o["content"])] if m]
    assert moved == xs  # each response once, in order, across the kill

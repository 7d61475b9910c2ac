"""The computer-use agent's loop: prompt layout, coordinate conversion, bad lines, ending actions, final state.

The screen here is a small in-process stand-in (a unit test of the agent around the sandbox); the real
browser and X display have their own tests (test_browser_sandbox.py, test_desktop_sandbox.py).
"""

from __future__ import annotations

import io
import json

import pytest
import yaml
from PIL import Image

from toolpath.agents import episode
from toolpath.agents.episode import EpisodeError, run_episode
from toolpath.evals.runner import final_state
from toolpath.runs import Store
from toolpath.sandboxes.base import SandboxError
from toolpath.spec import parse_spec


class Screen:
    """A 1280x720 screen that records what was done to it."""

    OPTIONS = ("fail_on",)
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

    def act(self, action, args):
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
def screen(monkeypatch):
    monkeypatch.setitem(episode.SANDBOXES, "browser", (__name__, "Screen"))
    monkeypatch.setattr(episode, "SANDBOX_KINDS", ("none", *episode.SANDBOXES))
    return Screen


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
    for params, msg in [({"mode": "fast"}, "mode must be one of"), ({"coordinates": "px"}, "coordinates must be")]:
        with pytest.raises(EpisodeError, match=msg), Store(tmp_path / "home") as store:
            run_episode(parse_spec({"id": "x", "instruction": "i", "agent": {"name": "computer_use",
                                                                             "params": params}}), store)
    with pytest.raises(EpisodeError, match="unknown parameter"):
        with Store(tmp_path / "home") as store:
            run_episode(parse_spec({"id": "x", "instruction": "i", "agent": {"name": "computer_use",
                                                                             "params": {"speed": 1}}}), store)

"""The embodied agent on the real pybullet tabletop: image → FSD answers → checked points → grasp → motion → success."""

from __future__ import annotations

import importlib.util
import json

import pytest
import yaml
from conftest import ROOT, toolpath_cli

from toolpath.agents.episode import run_episode
from toolpath.baselines.fsd_oracle import OraclePolicy
from toolpath.policies.formats.fsd import question_kind
from toolpath.runs import Store
from toolpath.spec import parse_spec

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pybullet") is None,
                                reason="pybullet is not installed (pip install 'toolpath[robot]')")


def spec(tmp_path, **over):
    data = {"id": "pp", "instruction": "put the red cube on the blue plate", "agent": {"name": "embodied"},
            "model": "oracle", "limits": {"max_steps": 20},
            "sandbox": {"kind": "robot", "options": {"seed": 7, "objects": ["red cube", "green cube", "blue plate",
                                                                             "yellow plate"]}}, **over}
    return parse_spec(data, base_dir=tmp_path)


def images_of(steps, node):
    return [img["name"] for s in steps if s["node"] == node for m in s["payload"]["messages"]
            for img in m.get("images", [])]


def test_example_picks_and_places_with_the_detector_and_records_images_and_trace(tmp_path):
    """`toolpath run examples/pick_place.yaml`, as a user runs it (stdout is the JSON line, nothing else)."""
    home = tmp_path / "home"
    r = toolpath_cli("run", ROOT / "examples" / "pick_place.yaml", "--json", home=home, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "finished" and out["answer"] == "success: the red cube is on the blue plate"
    with Store(home) as store:
        steps = store.steps(out["run_id"])
    assert images_of(steps, "observe") == ["camera_1.png", "depth_view_1.png"]
    observe = [s for s in steps if s["node"] == "observe"][0]["payload"]
    assert observe["depth_mm"]["name"] == "depth_1.png"  # the data, in millimetres
    assert images_of(steps, "reason") == ["trace_1.png"] and images_of(steps, "check") == ["camera_final.png"]
    questions = [s["payload"]["question"] for s in steps if s["node"] == "policy"]
    assert questions == ["relations", "trace", "free_space", "identify", "identify", "identify"]
    calls = [m["tool_calls"][0]["name"] for s in steps if s["node"] == "execute" for m in s["payload"]["messages"]
             if m.get("tool_calls")]
    assert calls == ["gripper", "move_ee", "move_ee", "gripper", "move_ee", "move_ee", "move_ee", "gripper",
                     "move_ee", "home"]
    closed = [s for s in steps if s["node"] == "execute"][3]["payload"]["observations"][0]["content"]
    assert closed.startswith("closed: holding red cube")
    final = steps[-1]["payload"]["final_state"]
    assert final["success"] is True and final["judged_by"] == "simulator"
    assert final["visual_check"] == {"seen_at_place": "red cube", "ok": True}
    assert final["truth"]["pick_on_object"] and final["truth"]["place_on_target"]
    assert len(final["truth"]["gt_trace"]) == 8


def test_a_recorded_trace_replays_one_answer_per_question(tmp_path):
    """A scripted policy answers step n with response n, although each question comes in a fresh prompt.
    (Old: the turn was counted from that prompt, so every question got the first recorded answer.)"""
    with Store(tmp_path / "home") as store:
        first = run_episode(spec(tmp_path), store)
        raws = [s["payload"]["raw"] for s in store.steps(first.run_id) if s["node"] == "policy"]
    assert first.status == "finished" and len(set(raws)) > 3
    (tmp_path / "trace.yaml").write_text(yaml.safe_dump(raws))
    with Store(tmp_path / "home") as store:
        again = run_episode(spec(tmp_path, model="scripted:trace.yaml"), store)
        steps = store.steps(again.run_id)
    assert [s["payload"]["raw"] for s in steps if s["node"] == "policy"] == raws
    assert [s["payload"]["issues"] for s in steps if s["node"] == "policy"] == [[]] * len(raws)
    assert again.status == "finished" and again.answer == first.answer


class WrongFirstTrace(OraclePolicy):
    """The oracle, except that its first trace starts on the plate: the consistency check must catch it."""

    def __init__(self):
        super().__init__()
        self.traces = 0
        self.prompts: list[str] = []

    def respond(self, messages, tools, **generation):
        text = messages[-1].content
        self.prompts.append(text)
        resp = super().respond(messages, tools, **generation)
        if question_kind(text) == "trace":
            self.traces += 1
            if self.traces == 1:
                import re

                pts = re.search(r"<point>(.*)</point>", resp.raw, re.S).group(1)
                reversed_pts = json.dumps(list(reversed(json.loads(pts))))
                resp.raw = resp.text = f"<answer><point>{reversed_pts}</point></answer>"
        return resp


def test_a_point_on_the_wrong_object_is_caught_retried_and_both_answers_recorded(tmp_path):
    policy = WrongFirstTrace()
    with Store(tmp_path / "home") as store:
        res = run_episode(spec(tmp_path), store, policy=policy)
        steps = store.steps(res.run_id)
    assert res.status == "finished", res.error
    verifies = [s["payload"]["checks"] for s in steps if s["node"] == "verify"]
    assert len(verifies) == 2
    first_pick = verifies[0][0]
    assert first_pick["role"] == "pick" and not first_pick["ok"] and first_pick["seen"] == "blue plate"
    assert all(c["ok"] for c in verifies[1])
    retry = [s for s in steps if s["node"] == "retry"][0]["payload"]["messages"][0]["content"]
    assert "lies on blue plate, not on the red cube" in retry
    # the second attempt's questions carry what went wrong
    assert any("Note: the pick point" in p for p in policy.prompts[5:])
    assert images_of(steps, "reason") == ["trace_1.png", "trace_2.png"]  # one drawing per reasoning pass


def test_an_object_not_in_the_scene_fails_named_without_moving(tmp_path):
    s = spec(tmp_path, instruction="put the purple cube on the blue plate", model="detector",
             agent={"name": "embodied", "params": {"retries": 1}})
    with Store(tmp_path / "home") as store:
        res = run_episode(s, store)
        steps = store.steps(res.run_id)
    assert res.status == "failed"
    assert "purple cube" in res.error and "after 2 attempt(s)" in res.error
    assert not [s for s in steps if s["node"] == "execute"]  # nothing moved
    final = steps[-1]["payload"]["final_state"]
    assert final["success"] is False


def test_affordance_representation_on_a_cluttered_scene(tmp_path):
    s = spec(tmp_path, instruction="place the yellow block onto the green dish",
             agent={"name": "embodied", "params": {"representation": "affordance"}},
             sandbox={"kind": "robot", "options": {"seed": 11, "objects": [
                 "red cube", "yellow cube", "blue cube", "green plate", "orange plate", "purple plate"]}})
    with Store(tmp_path / "home") as store:
        res = run_episode(s, store)
        steps = store.steps(res.run_id)
    assert res.status == "finished", res.error
    assert [s["payload"]["question"] for s in steps if s["node"] == "policy"][:3] == ["relations", "affordance",
                                                                                      "free_space"]
    assert steps[-1]["payload"]["final_state"]["reason"].startswith("yellow cube rests on green plate")

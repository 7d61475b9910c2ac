"""A model's step cannot outlast the run's time budget (limits.max_seconds).

Each test gives a real sandbox (Xvfb, Chromium, the process kernel, pybullet) one step that asks for far more
time than the budget has left: waits, thousands of moves, a 100,000-character write, a 30-second code cell, a
robot path. The step must stop at the deadline, tell the model (and the record) what it did not do, and end the
run as budget_exhausted with the reason: never leave it `running` and never run on for the time it asked for.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest
import yaml

from toolpath.agents.episode import run_episode
from toolpath.deadline import BUDGET_SPENT
from toolpath.runs import Store
from toolpath.spec import parse_spec

needs_xvfb = pytest.mark.skipif(shutil.which("Xvfb") is None or importlib.util.find_spec("pyautogui") is None,
                                reason="needs Xvfb and pyautogui")


def gui_spec(tmp_path: Path, replies: list[str], kind: str, max_seconds: float, evaluator=None, **options):
    (tmp_path / "replies.yaml").write_text(yaml.safe_dump(replies))
    data = {"id": "budget", "instruction": "do it", "model": "scripted:replies.yaml",
            "agent": {"name": "computer_use", "params": {"coordinates": "normalized"}},
            "sandbox": {"kind": kind, "options": options}, "limits": {"max_seconds": max_seconds, "max_steps": 5}}
    if evaluator:
        data["evaluator"] = evaluator
    return parse_spec(data, base_dir=tmp_path)


def act_observations(steps: list[dict]) -> list[str]:
    return [o["content"] for s in steps if s["node"] == "act" for o in s["payload"]["observations"]]


@needs_xvfb
def test_waits_in_one_step_stop_at_the_budget_and_the_rest_is_reported(tmp_path):
    # Old: all three waits ran (15 s of a 2 s budget) before the budget was even looked at.
    spec = gui_spec(tmp_path, ["<action>wait(seconds=5)\nwait(seconds=5)\nwait(seconds=5)</action>"], "desktop", 2)
    with Store(tmp_path / "home") as store:
        res = run_episode(spec, store)
        steps = store.steps(res.run_id)
        row = store.get_run(res.run_id)
    assert res.status == row["status"] == "budget_exhausted"
    assert "2 calls not run (wait x2)" in res.error
    first, *rest = act_observations(steps)
    assert first.startswith("waited ") and "of the 5 asked" in first and BUDGET_SPENT in first
    assert rest == [f"wait: not run: {BUDGET_SPENT}"] * 2


@needs_xvfb
def test_thousands_of_moves_in_one_step_stop_at_the_budget(tmp_path):
    moves = "\n".join(f"moveTo(x={(i % 100) / 100}, y=0.5)" for i in range(300))  # old: 30 s, 0.1 s each
    spec = gui_spec(tmp_path, [f"<action>{moves}</action>"], "desktop", 2)
    with Store(tmp_path / "home") as store:
        res = run_episode(spec, store)
        seen = act_observations(store.steps(res.run_id))
    assert res.status == "budget_exhausted"
    done = [o for o in seen if o.startswith("moved the pointer")]
    not_run = [o for o in seen if o == f"moveTo: not run: {BUDGET_SPENT}"]
    assert done and not_run and len(done) + len(not_run) == len(seen)  # every line accounted for, none lost
    assert re.search(rf"{len(not_run)} calls not run \(moveTo x{len(not_run)}\)", res.error)


@pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="needs playwright and Chromium")
def test_a_100000_character_write_is_bounded_and_what_was_not_typed_is_reported(tmp_path):
    from toolpath.sandboxes.browser import chromium_path

    if chromium_path() is None:
        pytest.skip("no Chromium")
    page = tmp_path / "page.html"
    page.write_text("<title>Form</title><input id=t autofocus><script>t.focus()</script>")
    probe = {"name": "exact", "options": {"probes": [{"url": "last", "js": "t.value.length"}]}}
    spec = gui_spec(tmp_path, ["<action>write(message='" + "x" * 100_000 + "')</action>",
                               "<action>terminate(status='success')</action>"], "browser", 2,
                    evaluator=probe, start_url=str(page))
    with Store(tmp_path / "home") as store:
        res = run_episode(spec, store)
        steps = store.steps(res.run_id)
    assert res.status in ("budget_exhausted", "finished")  # typing 2,000 characters may or may not fit in 2 s
    (wrote, *_) = act_observations(steps)
    assert "not typed: the last 98000 of 100000 characters" in wrote
    m = re.search(r"typed the first (\d+) of 2000 characters", wrote)
    typed = int(m.group(1)) if m else 2000
    final = steps[-1]["payload"]["final_state"]
    assert final["probes"][0]["value"] == typed  # the page holds exactly what the account says was typed


@pytest.mark.skipif(shutil.which("bwrap") is None and shutil.which("unshare") is None, reason="no process sandbox")
def test_a_code_cell_gets_only_the_time_left_and_later_calls_are_not_started(tmp_path):
    (tmp_path / "replies.yaml").write_text(yaml.safe_dump([{"tool_calls": [
        {"name": "python", "arguments": {"code": "import time\ntime.sleep(30)\nprint('slept')"}},
        {"name": "calculator", "arguments": {"expression": "1+1"}}]}]))
    spec = parse_spec({"id": "cell", "instruction": "sleep", "model": "scripted:replies.yaml", "sandbox": "process",
                       "tools": ["python", "calculator"], "limits": {"max_seconds": 3}}, base_dir=tmp_path)
    with Store(tmp_path / "home") as store:
        res = run_episode(spec, store)
        steps = store.steps(res.run_id)
    assert res.status == "budget_exhausted" and "1 call not run (calculator)" in res.error
    cell, calc = [o for s in steps if s["node"] == "tools" for o in s["payload"]["observations"]]
    assert "ran past its" in cell["content"] and "what was left of the run's time budget" in cell["content"]
    assert "slept" not in cell["content"]
    assert calc["error"] and calc["content"] == f"calculator: not run: {BUDGET_SPENT}"


@pytest.mark.skipif(importlib.util.find_spec("pybullet") is None, reason="needs pybullet")
def test_the_embodied_agent_starts_no_waypoint_once_the_budget_is_spent(tmp_path):
    """The last check before moving takes the rest of the budget: no waypoint may start after it, and the run
    still records its outcome (check, finish) instead of being left running."""
    import time

    from toolpath.baselines.fsd_oracle import OraclePolicy
    from toolpath.policies.formats.fsd import question_kind

    class SlowLastCheck(OraclePolicy):
        identified = 0

        def respond(self, messages, tools, **generation):
            if question_kind(messages[-1].content) == "identify":
                self.identified += 1
                if self.identified == 2:  # the place check, the last question before the arm moves
                    time.sleep(3.0)
            return super().respond(messages, tools, **generation)

    spec = parse_spec({"id": "pp", "instruction": "put the red cube on the blue plate", "agent": {"name": "embodied"},
                       "model": "oracle", "limits": {"max_steps": 20, "max_seconds": 3},
                       "sandbox": {"kind": "robot", "options": {"seed": 7, "objects": [
                           "red cube", "green cube", "blue plate", "yellow plate"]}}})
    with Store(tmp_path / "home") as store:
        res = run_episode(spec, store, policy=SlowLastCheck())
        steps = store.steps(res.run_id)
        row = store.get_run(res.run_id)
    assert res.status == row["status"] == "budget_exhausted"
    assert re.search(r"; \d+ waypoints not run", res.error), res.error
    nodes = [s["node"] for s in steps]
    assert "execute" not in nodes and nodes[-2:] == ["check", "finish"]
    assert steps[-1]["payload"]["final_state"]["success"] is False

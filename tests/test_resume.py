"""kill -9 in the middle of a run, then `toolpath resume`: no completed step is lost or run again."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, toolpath_cli, write

pytestmark = pytest.mark.slow

N = 8


def test_kill_9_then_resume(tmp_path, home):
    ticks = tmp_path / "ticks.txt"
    responses = "\n".join(
        f"- {{delay: 0.4, tool_calls: [{{name: tick, arguments: {{label: t{i}}}}}]}}" for i in range(1, N + 1))
    responses += "\n- {delay: 0.4, tool_calls: [{name: final_answer, arguments: {answer: all ticked}}]}\n"
    write(tmp_path / "r.yaml", responses)
    task = write(tmp_path / "task.yaml", f"id: ticker\ninstruction: tick {N} times\n"
                                         f"model: scripted:{tmp_path / 'r.yaml'}\n"
                                         f"tools: [tick, final_answer]\nlimits: {{max_steps: 20}}\n")
    env = {**os.environ, "TOOLPATH_HOME": str(home), "TOOLPATH_PLUGINS": "helpers", "TICK_FILE": str(ticks),
           "PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}"}
    proc = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "run", str(task), "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        if ticks.exists() and len(ticks.read_text().split()) >= 3:
            break
        time.sleep(0.02)
    else:
        proc.kill()
        pytest.fail("the run never reached its third tick: " + proc.stderr.read())
    time.sleep(0.1)  # past the checkpoint write, into the next policy call's 0.4 s
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    done_before = ticks.read_text().split()
    assert 3 <= len(done_before) < N

    from toolpath.runs import Store

    store = Store(home)
    (run,) = store.list_runs()
    assert run["status"] == "interrupted"  # still "running" in the table, but its process is gone

    r = toolpath_cli("resume", run["id"], "--json", home=home,
                     env={k: env[k] for k in ("TOOLPATH_PLUGINS", "TICK_FILE", "PYTHONPATH")})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "finished" and out["answer"] == "all ticked" and out["steps"] == N + 1
    assert f"resuming {run['id']} after step" in r.stderr

    # every tick happened exactly once, in order: nothing lost, nothing repeated
    assert ticks.read_text().split() == [f"t{i}" for i in range(1, N + 1)]
    steps = store.steps(run["id"])
    assert [s["seq"] for s in steps] == list(range(0, 2 * (N + 1) + 1))
    assert [s["node"] for s in steps[1:]] == ["policy", "tools"] * (N + 1)
    labels = [s["payload"]["observations"][0]["content"] for s in steps if s["node"] == "tools"]
    assert labels == [f"ticked t{i}" for i in range(1, N + 1)] + ["all ticked"]
    assert store.get_run(run["id"])["status"] == "finished"
    # resuming a finished run changes nothing
    again = json.loads(toolpath_cli("resume", run["id"], "--json", home=home).stdout)
    assert again["status"] == "finished" and again["steps"] == N + 1

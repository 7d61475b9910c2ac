"""pySpatial's visual-program agent end to end: program → sandbox → answer, with repairs and the direct fallback."""

import pytest
from conftest import ROOT

from toolpath.agents.episode import run_episode
from toolpath.agents.visual_program import extract_program, parse_answer
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.sandboxes.process import bwrap_works
from toolpath.spec import parse_spec

needs_bwrap = pytest.mark.skipif(bwrap_works() is not None, reason=f"no bubblewrap sandbox: {bwrap_works()}")
BARS = str(ROOT / "examples" / "assets" / "bars.png")


def spec(**params):
    return parse_spec({"id": "vp", "instruction": "How wide is the image, in pixels?", "inputs": {"images": [BARS]},
                       "agent": {"name": "visual_program", "params": params}, "model": "scripted:none.yaml"})


def program(body):
    return f"Here is my program.\n```python\ndef program(scene):\n{body}\n```"


def phases(store, run_id):
    return [(s["node"], s["payload"].get("phase")) for s in store.steps(run_id)][1:]


def test_extracting_the_program_and_the_answer_is_tolerant_and_says_what_is_missing():
    assert extract_program(program("    return 1"))[0] == "def program(scene):\n    return 1"
    assert extract_program("def program(scene):\n    return 2")[0].endswith("return 2")  # no fence
    assert "no `def program(scene):`" in extract_program("I think it is A.")[1]
    assert "does not define" in extract_program("```python\nprint(1)\n```")[1]
    assert parse_answer('Thinking... {"reasoning": "wide", "answer": "B"}') == ("B", "wide")
    assert parse_answer("Answer: C")[0] == "C" and parse_answer("just B")[0] == "just B"


@needs_bwrap
def test_a_program_runs_in_the_sandbox_and_the_answer_sees_its_output(store):
    script = [program("    return scene.images[0].size[0]"), '{"reasoning": "the program said 320", "answer": "320"}']
    r = run_episode(spec(), store, policy=ScriptedPolicy(script))
    assert (r.status, r.answer) == ("finished", "320")
    assert phases(store, r.run_id) == [("policy", "program"), ("tools", None), ("policy", "answer")]
    obs = store.steps(r.run_id)[2]["payload"]["observations"][0]["content"]
    assert obs.startswith("Code execution result:\nstdout:\n320")
    note = store.steps(r.run_id)[1]["payload"]["messages"][0]["content"]
    assert "needs at least two images" in note  # one image: no reconstruction, and the model is told why


@needs_bwrap
def test_an_error_goes_back_for_repair_and_returned_images_are_shown(store):
    script = [program("    return undefined_name"),
              program("    im = scene.images[0]\n    return [im.crop((0, 0, 10, 10)), 'cropped']"),
              '{"answer": "320"}']
    r = run_episode(spec(), store, policy=ScriptedPolicy(script))
    assert (r.status, r.answer) == ("finished", "320")
    steps = store.steps(r.run_id)
    repair = steps[3]["payload"]["messages"][0]["content"]
    assert repair.startswith("That did not work: the program raised an error") and "NameError" in repair
    shown = steps[4]["payload"]["observations"][0]
    assert "Images: 1" in shown["content"] and shown["artifacts"][0]["mime"] == "image/png"


@needs_bwrap
def test_after_the_repairs_it_answers_directly_and_says_so(store):
    script = [program("    return 1 / 0"), "no code this time", program("    while True:\n        pass"),
              '{"reasoning": "from the picture", "answer": "about 300"}']
    r = run_episode(spec(repairs=2, program_seconds=1), store, policy=ScriptedPolicy(script))
    assert (r.status, r.answer) == ("finished", "about 300")
    got = phases(store, r.run_id)
    assert got[-1] == ("policy", "direct") and got.count(("policy", "program")) == 3
    timeout = [s for s in store.steps(r.run_id) if s["node"] == "tools"][-1]["payload"]["observations"][0]["content"]
    assert "ran past its 1 s limit" in timeout


def test_unknown_parameters_are_refused(store):
    from toolpath.agents.episode import EpisodeError

    with pytest.raises(EpisodeError, match="agent.params.repiars: agent 'visual_program' has no option 'repiars'; "
                                           "its options: repairs, program_seconds, backend"):
        run_episode(spec(repiars=1), store, policy=ScriptedPolicy([]))
    with pytest.raises(EpisodeError, match="agent.params.backend: unknown reconstruction backend; expected one of"):
        run_episode(spec(backend="magic"), store, policy=ScriptedPolicy([]))


@needs_bwrap
def test_the_camera_motion_example_reconstructs_and_answers_through_the_cli(home):
    """Real parts end to end: the classic reconstruction of two rendered views, the program in the sandbox."""
    import json

    from conftest import toolpath_cli

    pytest.importorskip("cv2", reason="the classic backend needs OpenCV (pip install 'toolpath[spatial]')")
    r = toolpath_cli("run", ROOT / "examples" / "camera_motion.yaml", "--json", home=home, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["status"], out["answer"], out["score"]) == ("finished", "B", 1.0)
    from toolpath.runs import Store

    steps = Store(home).steps(out["run_id"])
    note = steps[1]["payload"]["messages"][0]["content"]
    assert "2 of 2 camera poses recovered" in note
    printed = steps[2]["payload"]["observations"][0]["content"]
    assert "moved forward-right, turned right by about 25°" in printed  # the ground truth of the rendered views

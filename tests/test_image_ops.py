"""Image tools on a real PNG (the measure_bars example image), alone and inside an episode."""

from pathlib import Path

import pytest
from conftest import ROOT

from toolpath.agents.episode import run_episode
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.spec import parse_spec
from toolpath.tools.registry import ToolContext, ToolError, get_tool

BARS = ROOT / "examples" / "assets" / "bars.png"


@pytest.fixture
def ctx(store):
    return ToolContext(save_artifact=store.put_artifact, images={"image_1": BARS})


def call(name, ctx, **args):
    return get_tool(name).call(args, ctx)


def test_measure_finds_the_red_bar(ctx):
    r = call("measure", ctx, image="image_1", color="red")
    assert r.data["width"] == 320 and r.data["box"] == [40, 60, 177, 91] and r.data["box_width"] == 137
    assert "137 wide" in r.content


def test_crop_then_measure_the_crop_by_its_new_name(ctx):
    c = call("crop", ctx, image="image_1", box=[0, 100, 320, 200])
    assert c.content.startswith("crop_1: 320x100 image") and c.artifacts[0].mime == "image/png"
    m = call("measure", ctx, image="crop_1", color="blue")
    assert m.data["box_width"] == 88 and m.data["box"][1] == 20


def test_zoom_rotate_contrast(ctx):
    from PIL import Image

    z = call("zoom", ctx, image="image_1", factor=2, x=100, y=75)
    assert Image.open(z.artifacts[0].path).size == (320, 200) and "shows [20, 25, 180, 125]" in z.content
    r = call("rotate", ctx, image="image_1", degrees=90)
    assert Image.open(r.artifacts[0].path).size == (200, 320)
    c = call("contrast", ctx, image="image_1", factor=2)
    assert Path(c.artifacts[0].path).is_file() and c.content.startswith("contrast_1")


@pytest.mark.parametrize("name, args, words", [
    ("crop", {"image": "image_9", "box": [0, 0, 1, 1]}, "unknown image 'image_9'; images in this episode: image_1"),
    ("crop", {"image": "image_1", "box": [0, 0, 999, 10]}, "not inside the 320x200 image"),
    ("crop", {"image": "image_1", "box": [0, 0, 10]}, "must be [left, top, right, bottom]"),
    ("zoom", {"image": "image_1", "factor": 20}, "at most 8"),
    ("zoom", {"image": "image_1", "factor": 2, "x": 500}, "outside the 320x200 image"),
    ("rotate", {"image": "image_1", "degrees": 1000}, "between -360 and 360"),
    ("contrast", {"image": "image_1", "factor": 0}, "between 0.1 and 5"),
    ("measure", {"image": "image_1", "color": "chartreuse"}, "unknown color"),
])
def test_bad_arguments_say_what_is_allowed(ctx, name, args, words):
    with pytest.raises(ToolError) as ei:
        call(name, ctx, **args)
    assert words in str(ei.value)


def test_a_model_without_code_measures_the_bar_through_the_tools(store):
    spec = parse_spec({"id": "bars", "instruction": "How wide is the red bar?", "model": "scripted:x",
                       "inputs": {"images": [str(BARS)]}, "tools": ["crop", "measure", "final_answer"]})
    script = [{"tool_calls": [{"name": "crop", "arguments": {"image": "image_1", "box": [0, 0, 320, 100]}}]},
              {"tool_calls": [{"name": "measure", "arguments": {"image": "crop_1", "color": "red"}}]},
              {"tool_calls": [{"name": "final_answer", "arguments": {"answer": "137"}}]}]
    r = run_episode(spec, store, policy=ScriptedPolicy(script))
    assert r.status == "finished" and r.answer == "137"
    obs = [s["payload"]["messages"][0] for s in store.steps(r.run_id) if s["node"] == "tools"]
    assert obs[0]["images"][0]["name"] == "crop_1.png" and "137 wide" in obs[1]["content"]


def test_a_task_image_may_be_named_by_its_file_name(store):
    ctx = ToolContext(save_artifact=store.put_artifact, images={"image_1": BARS}, inputs=[BARS])
    by_file, by_name = (call("measure", ctx, image=n, color="red").content for n in (BARS.name, "image_1"))
    assert by_file.split(":", 1)[1] == by_name.split(":", 1)[1]  # the same image measured
    assert ctx.image_name(BARS.name) == "image_1"
    assert call("crop", ctx, image=BARS.name, box=[0, 0, 10, 10]).content.startswith("crop_1")
    # only the task's own images go by their file names: a crop's artifact file name is not a name
    with pytest.raises(ToolError, match="unknown image .*images in this episode: image_1, crop_1"):
        call("measure", ctx, image=ctx.images["crop_1"].name, color="red")

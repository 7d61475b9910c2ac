"""ScaleCUA's action space: the typed GUI tools, the coordinate conventions, and the tolerant action parser."""

from __future__ import annotations

import pytest

from toolpath.coords import CONVENTIONS, CoordinateSpace, smart_resize
from toolpath.policies.formats.scalecua import ScaleCUAFormat, split_calls
from toolpath.tools.gui import ACTIONS, MAX_KEYS, MAX_WRITE_CHARS, PLATFORMS, point_fields
from toolpath.tools.registry import ToolContext, ToolError, get_tool, load_tools


def schemas(platform: str = "web") -> list[dict]:
    tools = load_tools()
    return [tools[n].schema() for n in PLATFORMS[platform]]


# ---- coordinates ----------------------------------------------------------------------------------------

def test_smart_resize_matches_qwen_rules():
    assert smart_resize(720, 1280) == (728, 1288)  # rounded to multiples of 28
    assert smart_resize(1080, 1920) == (1092, 1932)
    h, w = smart_resize(4000, 6000, max_pixels=1280 * 28 * 28)  # too big: scaled down, aspect kept
    assert h % 28 == 0 and w % 28 == 0 and h * w <= 1280 * 28 * 28
    assert abs(w / h - 1.5) < 0.05
    h, w = smart_resize(10, 10)  # too small: scaled up to min_pixels
    assert h * w >= 56 * 56
    with pytest.raises(ValueError, match="positive"):
        smart_resize(0, 10)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_every_pixel_round_trips_within_a_pixel(convention):
    space = CoordinateSpace(convention, 1280, 720)
    for px in range(0, 1280, 13):
        for py in range(0, 720, 17):
            qx, qy = space.to_screen(*space.from_screen(px, py))
            assert abs(qx - px) <= 1 and abs(qy - py) <= 1, (px, py, qx, qy)


def test_conventions_map_the_same_point():
    # The centre of a 1280x720 screen in each convention.
    assert CoordinateSpace("normalized", 1280, 720).to_screen(0.5, 0.5) == (640, 360)
    assert CoordinateSpace("grid1000", 1280, 720).to_screen(500, 500) == (640, 360)
    assert CoordinateSpace("absolute", 1280, 720).to_screen(644, 364) == (640, 360)  # 1288x728 model image
    # The far edge is the last pixel, not one past it.
    assert CoordinateSpace("normalized", 1280, 720).to_screen(1.0, 1.0) == (1279, 719)


def test_points_outside_the_image_are_errors_not_clamped():
    space = CoordinateSpace("normalized", 1280, 720)
    with pytest.raises(ValueError, match="x=1.4 is outside"):
        space.to_screen(1.4, 0.5)
    with pytest.raises(ValueError, match="not a number"):
        space.to_screen("left", 0.5)
    with pytest.raises(ValueError, match="unknown coordinate convention"):
        CoordinateSpace("percent", 10, 10)


# ---- tools ----------------------------------------------------------------------------------------------

def test_every_action_is_a_tool_with_scalecua_argument_names():
    tools = load_tools()
    for name in ACTIONS:
        assert name in tools and "gui" in tools[name].tags
    props = lambda n: list(tools[n].schema()["parameters"]["properties"])  # noqa: E731
    assert props("click") == ["x", "y", "clicks", "button"]
    assert props("swipe") == ["from_coord", "to_coord", "direction", "amount"]
    assert props("terminate") == ["status", "info"]
    assert point_fields("dragTo") == (("x", "y"),) and point_fields("swipe") == ("from_coord", "to_coord")
    assert "swipe" in PLATFORMS["web"] and "swipe" not in PLATFORMS["desktop"]
    assert "open_app" in PLATFORMS["phone"] and "hotkey" not in PLATFORMS["phone"]


class FakeScreen:
    platform = "web"

    def __init__(self):
        self.done = []
        self.deadlines = []

    def act(self, action, args, deadline=None):
        self.done.append((action, args))
        self.deadlines.append(deadline)
        return f"did {action}"


def test_a_tool_validates_then_hands_pixels_to_the_sandbox():
    screen = FakeScreen()
    ctx = ToolContext(sandbox=screen)
    out = get_tool("click").call({"x": 10, "y": 20, "button": "right"}, ctx)
    assert out.content == "did click"
    assert screen.done == [("click", {"x": 10, "y": 20, "clicks": 1, "button": "right"})]
    get_tool("press").call({"keys": "Enter"}, ctx)
    assert screen.done[-1] == ("press", {"keys": ["enter"], "presses": 1})
    for name, bad, msg in [("click", {"button": "top"}, "button"), ("scroll", {"clicks": 0}, "non-zero"),
                           ("press", {"keys": []}, "key name"), ("wait", {"seconds": -1}, "seconds"),
                           ("swipe", {"from_coord": [1]}, r"\[x, y\]"), ("click", {"z": 1}, "unknown argument")]:
        with pytest.raises(ToolError, match=msg):
            get_tool(name).call(bad, ctx)
    assert len(screen.done) == 2  # nothing invalid reached the screen


def test_one_action_is_bounded_on_its_own_and_gets_the_step_deadline():
    screen = FakeScreen()
    ctx = ToolContext(sandbox=screen)
    out = get_tool("write").call({"message": "x" * 100_000}, ctx)
    assert screen.done[-1] == ("write", {"message": "x" * MAX_WRITE_CHARS})
    assert f"not typed: the last {100_000 - MAX_WRITE_CHARS} of 100000 characters" in out.content
    with pytest.raises(ToolError, match=f"at most {MAX_KEYS} keys"):
        get_tool("press").call({"keys": ["a"] * (MAX_KEYS + 1), "presses": 50}, ctx)
    assert len(screen.done) == 1 and screen.deadlines == [None]  # called outside an agent: no deadline
    ctx.deadline = 1234.5
    get_tool("wait").call({"seconds": 1}, ctx)
    assert screen.deadlines[-1] == 1234.5


def test_ending_actions_are_final_and_never_sent_to_a_sandbox():
    screen = FakeScreen()
    out = get_tool("response").call({"answer": "42"}, ToolContext(sandbox=screen))
    assert out.final and out.content == "42"
    out = get_tool("terminate").call({"status": "FAILURE", "info": "no such button"}, ToolContext(sandbox=screen))
    assert out.final and out.data["status"] == "failure"
    assert screen.done == []
    with pytest.raises(ToolError, match="no GUI sandbox"):
        get_tool("click").call({"x": 1, "y": 1}, ToolContext())


# ---- the ScaleCUA grammar -------------------------------------------------------------------------------

def test_reasoned_reply_with_several_calls():
    fmt = ScaleCUAFormat(mode="reasoned", schemas=schemas())
    p = fmt.parse("<think>The form is empty.</think>\n<operation>Fill in the name and save</operation>\n"
                  "<action>\nclick(100, 200)\nwrite(message=\"O'Brien, (Jr.)\")\nhotkey('ctrl', 's')\n</action>")
    assert p.content == "Fill in the name and save" and not p.issues
    assert [(c.name, c.arguments) for c in p.calls] == [
        ("click", {"x": 100, "y": 200}), ("write", {"message": "O'Brien, (Jr.)"}), ("hotkey", {"keys": ["ctrl", "s"]})]
    assert len({c.id for c in p.calls}) == 3


def test_a_malformed_line_is_reported_and_the_others_still_run():
    fmt = ScaleCUAFormat(schemas=schemas())
    p = fmt.parse("<operation>go</operation><action>click(x=5 y=6)\nfly(x=1)\nclick(x=__import__('os'))\n"
                  "write(message=\"ok\")\npress('enter')</action>")
    assert [c.name for c in p.calls] == ["write", "press"]
    assert len(p.issues) == 3
    assert "line 1" in p.issues[0] and "not a valid call" in p.issues[0]
    assert "unknown action 'fly'" in p.issues[1] and "click" in p.issues[1]
    assert "literals" in p.issues[2]  # nothing in a model's call is evaluated
    assert "the others ran" in fmt.feedback(p.issues)


def test_values_that_are_not_json_data_are_issues_and_surrogates_are_replaced():
    p = ScaleCUAFormat(schemas=schemas()).parse("<action>click(x=1+2j, y=3)\nhotkey({'ctrl', 'c'})\n"
                                                "write(message=b'x')\nwrite(message='a\ud800')</action>")
    assert [(c.name, c.arguments) for c in p.calls] == [("write", {"message": "a\ufffd"})]
    assert ["complex number" in p.issues[0], "a set" in p.issues[1], "bytes" in p.issues[2]] == [True] * 3


def test_calls_may_span_lines_and_hold_brackets_in_strings():
    block = "swipe(from_coord=[1, 2],\n      to_coord=[3, 4])\nwrite(message='a) (b [c')\n"
    assert split_calls(block) == [(1, "swipe(from_coord=[1, 2],\n      to_coord=[3, 4])"),
                                  (3, "write(message='a) (b [c')")]
    p = ScaleCUAFormat(schemas=schemas()).parse(f"<action>{block}</action>")
    assert [c.arguments for c in p.calls] == [{"from_coord": [1, 2], "to_coord": [3, 4]}, {"message": "a) (b [c"}]


def test_grounding_replies_tags_and_prefixes():
    fmt = ScaleCUAFormat(mode="grounding", schemas=schemas("desktop"))
    assert fmt.parse("(12, 30)").calls[0].arguments == {"x": 12, "y": 30}
    assert fmt.parse("<ACTION>pyautogui.click(x=0.2, y=0.4)</ACTION>").calls[0].arguments == {"x": 0.2, "y": 0.4}
    p = fmt.parse("<action>click(x=3, y=4)")  # generation stopped at </action>: the normal case
    assert p.calls and not p.issues
    assert "no <action>" in fmt.parse("I think it is the blue one").issues[0]
    assert "empty" in fmt.parse("<action>\n</action>").issues[0]
    assert "at most 4 positional" in fmt.parse("<action>click(1, 2, 3, 'left', 5)</action>").issues[0]


def test_history_is_rendered_back_in_the_grammar():
    fmt = ScaleCUAFormat(schemas=schemas())
    p = fmt.parse("<operation>Save</operation><action>hotkey('ctrl', 's')</action>")
    again = fmt.parse(fmt.render_assistant(p.content, p.calls))
    assert again.content == "Save" and [c.arguments for c in again.calls] == [{"keys": ["ctrl", "s"]}]


def test_format_checks_its_settings():
    with pytest.raises(ValueError, match="unknown mode"):
        ScaleCUAFormat(mode="fast")
    with pytest.raises(ValueError, match="convention"):
        ScaleCUAFormat(convention="pixels")
    assert ScaleCUAFormat(convention="grid1000").space(1920, 1080).to_screen(1000, 0) == (1919, 0)

"""The OCR grounder (a baseline GUI-grounding policy): queries read from instructions, the agent's message read,
unreadable screens declined, accuracy on the generated suite's screens, and the runner scoring it."""

from __future__ import annotations

import io
import json
import os

import pytest
from PIL import Image

from toolpath import registry
from toolpath.agents.episode import run_episode
from toolpath.baselines.ocr_grounder import OCRGrounder, query_of, read_prompt
from toolpath.evals.benchmarks import gui_grounding as G
from toolpath.evals.benchmarks.osworld_g import read_records
from toolpath.evals.scorers import grounding
from toolpath.policies.formats.scalecua import ScaleCUAFormat
from toolpath.runs import Store
from toolpath.sandboxes.base import SandboxOptions
from toolpath.spec import parse_spec
from toolpath.state import ArtifactRef, Message

GROUNDER = "python:toolpath.baselines.ocr_grounder:OCRGrounder"
POINT = lambda x, y: json.dumps({"point": [x, y]})  # noqa: E731
REFUSED = json.dumps({"refused": True, "reason": "not there"})


def _png(path, size):
    Image.new("RGB", size, "white").save(path)
    return path


def test_queries_from_instructions():
    assert query_of("click the 'Export' button") == (["Export"], "button")
    assert query_of("Open the File menu") == (["File"], "menu")
    assert query_of("the search field") == (["search"], "field")
    assert query_of("click the search box") == (["search"], "field")
    assert query_of("the icon with the tooltip 'Zoom In'") == (["Zoom In"], "icon")
    assert query_of("open the Go menu") == (["Go"], "menu")
    assert query_of("click the Email field") == (["Email"], "field")
    assert query_of("type 'hello' into the Name field") == (["Name"], "field")
    assert query_of("click the") == ([], None)


def test_the_agents_message_is_read():
    msg = Message(role="user", images=[ArtifactRef(sha256="0" * 64, path="/x/s.png")], content=(
        "Task: click the 'Save' button\nPrevious operations:\nStep 1: Click 'Save'\n"
        "Step 2: the current screenshot is attached. Reply as ..."))
    assert read_prompt([Message(role="system", content="sys"), msg]) == ("click the 'Save' button",
                                                                          ["Click 'Save'"], "/x/s.png")


def _ask(path, instruction, fmt):
    msg = Message(role="user", content=f"Task: {instruction}\nStep 1: the current screenshot is attached.",
                  images=[ArtifactRef(sha256="0" * 64, path=str(path))])
    return OCRGrounder().respond([msg], [], format=fmt)


def test_an_unreadable_or_empty_screenshot_is_declined_with_the_reason(tmp_path):
    fmt = ScaleCUAFormat(mode="grounding")
    garbled = tmp_path / "garbled.png"
    garbled.write_bytes(os.urandom(300))
    for path, why in [(garbled, "cannot read the screenshot"), (tmp_path / "none.png", "cannot read the screenshot"),
                      (_png(tmp_path / "blank.png", (320, 200)), "no text on the screen")]:
        r = _ask(path, "click the 'Save' button", fmt)
        assert [c.name for c in r.tool_calls] == ["terminate"], r.raw
        assert r.tool_calls[0].arguments["status"] == "failure" and why in r.tool_calls[0].arguments["info"]
        assert r.tokens_in == r.tokens_out == 0 and r.latency_s >= 0


def _small_screen(tmp_path):
    """A 640x360 dialog: a menu bar, a labelled field, two buttons (small, so OCR is quick)."""
    from PIL import ImageDraw

    img = Image.new("RGB", (640, 360), (246, 245, 244))
    d = ImageDraw.Draw(img)
    f = G.ui_font("ui", 15)
    d.rectangle((0, 0, 639, 29), fill=(235, 235, 235))
    for x, m in ((10, "File"), (70, "Edit"), (130, "View")):
        d.text((x, 15), m, font=f, fill=(30, 30, 30), anchor="lm")
    d.text((40, 100), "Email:", font=f, fill=(30, 30, 30), anchor="lm")
    d.rectangle((120, 84, 420, 116), fill="white", outline=(180, 180, 180))  # the field: x 120..420, y 84..116
    for x0, label in ((120, "Export"), (260, "Cancel")):
        d.rounded_rectangle((x0, 200, x0 + 110, 236), radius=5, fill="white", outline=(170, 170, 170))
        d.text((x0 + 55, 218), label, font=f, fill=(30, 30, 30), anchor="mm")
    path = tmp_path / "dialog.png"
    img.save(path)
    return path


@pytest.fixture
def fake_screen():
    registry.add("sandbox", "desktop", FakeScreen)
    yield FakeScreen
    registry.reset()  # the built-in desktop again


class FakeScreenOptions(SandboxOptions):
    image: str | None = None


class FakeScreen:
    """A desktop that shows one PNG and records what was done to it."""

    Options = FakeScreenOptions
    platform = "desktop"
    log: list = []

    def __init__(self, limits, image=None):
        self.png = open(image, "rb").read()
        FakeScreen.log = []

    def start(self):
        return self

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def screen_size(self):
        return Image.open(io.BytesIO(self.png)).size

    def screenshot(self):
        return self.png

    def observe(self):
        return {}

    def act(self, action, args, deadline=None):
        FakeScreen.log.append((action, args))
        return f"{action} done"


def test_the_grounder_through_the_agent_in_every_convention_and_mode(tmp_path, fake_screen):
    shot = _small_screen(tmp_path)
    cases = [("click the 'Export' button", (120, 200, 230, 236)), ("open the View menu", (120, 0, 180, 30)),
             ("the Email field", (120, 84, 420, 116))]
    with Store(tmp_path / "home") as store:
        for conv in ("absolute", "normalized", "grid1000"):
            for instruction, (x0, y0, x1, y1) in cases:
                s = parse_spec({"id": "g", "instruction": instruction, "inputs": {"images": [str(shot)]},
                                "agent": {"name": "computer_use",
                                          "params": {"mode": "grounding", "coordinates": conv}}},
                               base_dir=tmp_path)
                res = run_episode(s, store, policy=OCRGrounder())
                px, py = json.loads(res.answer)["point"]
                assert x0 <= px <= x1 and y0 <= py <= y1, (conv, instruction, res.answer)
        s = parse_spec({"id": "r", "instruction": "click the 'Publish' button", "inputs": {"images": [str(shot)]},
                        "agent": {"name": "computer_use", "params": {"mode": "grounding"}}}, base_dir=tmp_path)
        answer = json.loads(run_episode(s, store, policy=OCRGrounder()).answer)
        assert answer["refused"] is True and "Publish" in answer["reason"]
        # direct mode on a screen: click the field, type into it, then finish on the next turn
        s = parse_spec({"id": "d", "instruction": "type 'a@b.c' into the Email field", "sandbox": {
            "kind": "desktop", "options": {"image": str(shot)}}, "agent": {"name": "computer_use",
                                                                          "params": {"coordinates": "normalized"}},
                        "model": GROUNDER}, base_dir=tmp_path)
        res = run_episode(s, store, policy=OCRGrounder())
    assert res.status == "finished" and res.answer == "success"
    (click, args), (write, wargs) = fake_screen.log[:2]
    assert click == "click" and 120 <= args["x"] <= 420 and 84 <= args["y"] <= 116
    assert (write, wargs) == ("write", {"message": "a@b.c"})


def test_ocr_results_are_cached_per_image_file(tmp_path, monkeypatch):
    shot = _small_screen(tmp_path)
    calls = []
    from toolpath.tools.image import text as T

    real = T._rapid_engine()
    monkeypatch.setattr(T, "_rapid_engine", lambda: (lambda img, **kw: (calls.append(1), real(img, **kw))[1]))
    fmt = ScaleCUAFormat(mode="grounding", convention="absolute")
    a = _ask(shot, "click the 'Cancel' button", fmt)
    b = _ask(shot, "click the 'Export' button", fmt)
    assert len(calls) == 1 and a.tool_calls[0].name == b.tool_calls[0].name == "click"
    assert a.tool_calls[0].arguments != b.tool_calls[0].arguments
    w, h = 640, 360
    px, py = fmt.space(w, h).to_screen(a.tool_calls[0].arguments["x"], a.tool_calls[0].arguments["y"])
    assert 260 <= px <= 370 and 200 <= py <= 236


@pytest.mark.slow
def test_grounder_accuracy_on_generated_screens(tmp_path):
    recs = read_records(G.write_suite(tmp_path / "suite", n=10, seed=11))  # the full figure: benchmarks/ocr_grounder.py
    fmt = ScaleCUAFormat(mode="grounding", convention="grid1000")
    hits, by_kind = 0, {}
    for r in recs:
        resp = _ask(r.data["image"], r.data["instruction"], fmt)
        call = resp.tool_calls[0]
        if call.name == "click":
            px, py = fmt.space(*r.data["image_size"]).to_screen(call.arguments["x"], call.arguments["y"])
            answer = POINT(px, py)
        else:
            answer = REFUSED
        s = grounding(answer, {"box_type": r.data["box_type"], "box_coordinates": r.data["box_coordinates"]}, {})
        hits += s
        by_kind.setdefault(r.category, []).append(s)
    assert hits / len(recs) >= 0.7, by_kind


class SmallSuite(G.GUIGrounding):
    def __init__(self):
        super().__init__(n=6)


@pytest.mark.slow
def test_the_runner_scores_the_suite_and_osworld_data_per_category(tmp_path, monkeypatch, store, request):
    from toolpath import registry
    from toolpath.evals.runner import run_eval

    registry.add("benchmark", "gui_grounding", SmallSuite)
    request.addfinalizer(registry.reset)  # the built-in table again after the test
    res = run_eval("gui_grounding", store, model=GROUNDER, limit=2)
    summary = res.summary()
    assert summary["n"] == 2 and all(s.status == "finished" for s in res.samples), res.samples
    assert all(json.loads(s.answer).keys() & {"point", "refused"} for s in res.samples)
    assert any(k.startswith("type:") for k in summary["metrics"])
    # the same files, read as OSWorld-G data through --data
    folder = SmallSuite().suite_folder(0)
    res2 = run_eval("osworld_g", store, model=GROUNDER, limit=2, data=str(folder))
    assert [s.score for s in res2.samples] == [s.score for s in res.samples]

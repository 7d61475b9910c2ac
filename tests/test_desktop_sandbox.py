"""The desktop sandbox on a real Xvfb: pyautogui's clicks and keys land in a real Tk program (and in a real
Chromium page), read back from what the program logged; errors are clear; nothing is left running."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from PIL import Image

from toolpath.deadline import BUDGET_SPENT
from toolpath.sandboxes import desktop
from toolpath.sandboxes.base import SandboxError
from toolpath.sandboxes.desktop import DesktopSandbox
from toolpath.sandboxes.leftovers import marked_pids

APP = Path(__file__).resolve().parents[1] / "examples" / "assets" / "desktop_app.py"

pytestmark = [
    pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (apt-get install xvfb)"),
    pytest.mark.skipif(importlib.util.find_spec("pyautogui") is None,
                       reason="pyautogui is not installed (pip install pyautogui)"),
]
needs_xdotool = pytest.mark.skipif(shutil.which("xdotool") is None, reason="xdotool is not installed")


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def wait_for(path: Path, event: str, timeout: float = 10.0, count: int = 1) -> list[dict]:
    """The log's `event` lines once there are `count` of them (the program writes them asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in read_log(path) if e["event"] == event]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def centre(box: list[int]) -> dict:
    return {"x": (box[0] + box[2]) / 2, "y": (box[1] + box[3]) / 2}


class Form:
    """The Tk form in a fresh sandbox: its log, and its widgets' boxes in screen pixels."""

    def __init__(self, tmp: Path, title: str = "Toolpath Form", **options):
        self.log = tmp / f"{title.replace(' ', '_')}.jsonl"
        self.box = DesktopSandbox(launch=[[sys.executable, str(APP), "--log", str(self.log), "--title", title]],
                                  **options).start()
        ready = wait_for(self.log, "ready")
        assert ready, f"the Tk form never logged 'ready': {read_log(self.log)}"
        self.window = ready[0]["window"]
        self.widgets = ready[0]["widgets"]

    def at(self, widget: str) -> dict:
        return centre(self.widgets[widget])

    def events(self, kind: str) -> list[dict]:
        return [e for e in read_log(self.log) if e["event"] == kind]

    def saved(self) -> dict:
        before = len(self.events("save"))
        self.box.act("click", self.at("save"))
        found = wait_for(self.log, "save", count=before + 1)
        assert len(found) > before, "Save was clicked but the form logged no save"
        return found[-1]


@pytest.fixture
def form(tmp_path):
    f = Form(tmp_path)
    yield f
    f.box.close()


def test_click_type_hotkey_and_save_land_in_the_program(form):
    box = form.box
    out = box.act("click", form.at("entry"))
    assert out.startswith("clicked (370, 115)") and "'Toolpath Form'" in out
    box.act("write", {"message": "hello"})
    box.act("hotkey", {"keys": ["ctrl", "a"]})  # select all, so what is typed next replaces it
    box.act("write", {"message": "Ada Lovelace!?"})
    box.act("press", {"keys": ["backspace"], "presses": 2})
    box.act("click", form.at("subscribe"))
    saved = form.saved()
    assert saved["name"] == "Ada Lovelace" and saved["subscribe"] is True
    clicks = form.events("click")
    assert [c["widget"] for c in clicks] == ["entry", "subscribe", "save"]
    assert (clicks[0]["x"], clicks[0]["y"]) == (370, 115)  # the pixel asked for, exactly


def test_text_outside_the_key_map_and_held_keys(form):
    box = form.box
    box.act("click", form.at("entry"))
    box.act("write", {"message": "café ñ"})  # é and ñ are not in pyautogui's X key map
    box.act("keyDown", {"key": "shift"})
    box.act("press", {"keys": "x"})
    box.act("keyUp", {"key": "shift"})
    box.act("press", {"keys": ["control+a"]})  # a combination written as one key
    box.act("press", {"keys": ["right", "!"]})
    assert form.saved()["name"] == "café ñX!"


def test_a_deadline_cuts_waits_and_typing_short_and_says_so(form):
    box = form.box
    out = box.act("wait", {"seconds": 30}, deadline=time.monotonic() + 0.2)
    assert "of the 30 asked" in out and BUDGET_SPENT in out
    box.act("click", form.at("entry"))
    out = box.act("write", {"message": "q" * 300}, deadline=time.monotonic() - 1)  # spent before it starts
    assert "typed the first 0 of 300 characters" in out and BUDGET_SPENT in out
    box.act("write", {"message": "ok"}, deadline=time.monotonic() + 60)
    assert form.saved()["name"] == "ok"  # nothing of the cut write reached the program


def test_mouse_gestures(form):
    box = form.box
    entry = form.at("entry")
    box.act("doubleClick", entry)
    assert wait_for(form.log, "double")[0]["widget"] == "entry"
    box.act("rightClick", form.at("status"))
    assert any(c["button"] == 3 and c["widget"] == "status" for c in form.events("click"))
    assert box.act("scroll", {"clicks": 3, **form.at("items")}).startswith("scrolled up 3 notches")
    box.act("scroll", {"clicks": -2, **form.at("items")})
    ups = wait_for(form.log, "scroll", count=5)
    assert [e["direction"] for e in ups] == ["up"] * 3 + ["down"] * 2 and ups[0]["widget"] == "items"

    x1, y1, x2, y2 = form.widgets["entry"]
    box.act("moveTo", {"x": x1 + 5, "y": y1 + 10})
    assert box.act("dragTo", {"x": x2 - 5, "y": y1 + 10}).startswith("dragged from")
    press, release = form.events("click")[-1], form.events("release")[-1]
    assert (press["x"], release["x"], release["y"]) == (x1 + 5, x2 - 5, y1 + 10)

    box.act("swipe", {"from_coord": [x1 + 20, y1 + 15], "to_coord": [x1 + 200, y1 + 15]})
    assert (form.events("click")[-1]["x"], form.events("release")[-1]["x"]) == (x1 + 20, x1 + 200)
    box.act("swipe", {"from_coord": [x1 + 20, y1 + 15], "direction": "right", "amount": 0.1})
    assert form.events("release")[-1]["x"] == x1 + 20 + 128  # a tenth of the 1280-pixel screen

    t = time.monotonic()
    assert "for 0.4 s" in box.act("long_press", {"x": x1 + 30, "y": y1 + 15, "duration": 0.4})
    assert time.monotonic() - t >= 0.4
    assert (form.events("click")[-1]["x"], form.events("release")[-1]["x"]) == (x1 + 30, x1 + 30)
    assert box.act("wait", {"seconds": 0}) == "waited 0 s"


def test_screenshot_is_the_screen(form):
    png = form.box.screenshot()
    img = Image.open(io.BytesIO(png))
    assert img.format == "PNG" and img.size == form.box.screen_size() == (1280, 720)
    x1, y1, x2, y2 = form.widgets["entry"]
    assert img.getpixel((5, 5)) == (0, 0, 0)  # the bare root window of a fresh Xvfb
    assert img.getpixel(((x1 + x2) // 2, y1 + 3)) == (255, 255, 255)  # inside the white entry
    assert len(img.crop(tuple(form.window)).getcolors(1 << 20)) > 10  # text and widgets, not a flat fill


def test_observe_lists_windows(form):
    seen = form.box.observe()
    assert seen["screen"] == [1280, 720]
    assert seen["focused"] == "Toolpath Form"
    (win,) = [w for w in seen["windows"] if w["title"] == "Toolpath Form"]
    assert win["box"] == form.window


def test_observe_without_xdotool_says_so(form, monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(desktop.shutil, "which", lambda name, *a, **k: None if name == "xdotool" else real_which(name))
    seen = form.box.observe()
    assert seen["windows"] == [] and "apt-get install xdotool" in seen["note"]
    assert seen["focused"] == "Toolpath Form"  # read through Xlib, which needs no xdotool


def test_two_sandboxes_one_after_another_and_side_by_side(tmp_path):
    first = Form(tmp_path, "First")
    first.box.act("click", first.at("entry"))
    first.box.act("write", {"message": "one"})
    assert first.saved()["name"] == "one"
    first.box.close()

    second = Form(tmp_path, "Second")  # may get the same display number: the old connection must not be reused
    third = Form(tmp_path, "Third")
    try:
        assert second.box.display != third.box.display
        for box, f, text in ((second.box, second, "two"), (third.box, third, "three"), (second.box, second, "2")):
            box.act("click", f.at("entry"))
            box.act("write", {"message": text})
        assert second.saved()["name"] == "two2" and third.saved()["name"] == "three"
        assert [w["title"] for w in second.box.observe()["windows"]] == ["Second"]
        assert first.events("save")[-1]["name"] == "one"
    finally:
        second.box.close()
        third.box.close()


def test_a_running_display_is_used_and_left_running(tmp_path, monkeypatch):
    host = DesktopSandbox().start()  # stands in for a display someone else runs
    try:
        monkeypatch.setenv("DISPLAY", host.display)
        monkeypatch.setenv("XAUTHORITY", host._env["XAUTHORITY"])
        for display in (host.display, "env"):
            f = Form(tmp_path, f"On {display}", display=display)
            assert f.box.display == host.display and f.box._xvfb is None
            f.box.act("click", f.at("entry"))
            f.box.act("write", {"message": display})
            assert f.saved()["name"] == display
            f.box.close()
            assert f.box._procs[0][1].poll() is not None  # what it launched is gone...
            assert host._xvfb.poll() is None  # ...the display it was given is not
        assert host.observe()["windows"] == []
    finally:
        host.close()


def test_actions_from_many_threads_are_serialised(form):
    box = form.box
    box.act("click", form.at("entry"))
    chunks = ["aaaa", "bbbb", "cccc", "dddd"]
    with ThreadPoolExecutor(4) as pool:  # toolpath runs tool calls in a pool like this
        list(pool.map(lambda m: box.act("write", {"message": m}), chunks))
    name = form.saved()["name"]
    assert sorted(name[i:i + 4] for i in range(0, 16, 4)) == chunks  # whole chunks, never interleaved


def test_bad_actions_are_clear_errors(form):
    box = form.box
    with pytest.raises(SandboxError, match=r"unknown key 'enterr'.*'enter'"):
        box.act("press", {"keys": ["a", "enterr"]})
    with pytest.raises(SandboxError, match="unknown key 'hyper'"):
        box.act("hotkey", {"keys": ["ctrl", "hyper"]})
    with pytest.raises(SandboxError, match=r"off the screen.*x 0\.\.1279"):
        box.act("click", {"x": 1280, "y": 10})
    with pytest.raises(SandboxError, match="off the screen"):
        box.act("swipe", {"from_coord": [10, -1], "to_coord": [20, 20]})
    with pytest.raises(SandboxError, match="needs a phone"):
        box.act("open_app", {"name": "Settings"})
    with pytest.raises(SandboxError, match="agent handles it"):
        box.act("terminate", {"status": "success"})
    with pytest.raises(SandboxError, match="unknown action 'fly'"):
        box.act("fly", {})
    assert box.act("click", {"x": 0, "y": 0}).startswith("clicked (0, 0)")  # the corner is no fail-safe here
    assert not form.events("key")  # nothing of the refused press was typed


def test_bad_options_are_clear_errors(monkeypatch):
    with pytest.raises(SandboxError, match="display: expected ':N'"):
        DesktopSandbox(display="")
    with pytest.raises(SandboxError, match="screen: expected"):
        DesktopSandbox(screen="big")
    with pytest.raises(SandboxError, match="screen: only applies"):
        DesktopSandbox(display=":5", screen="800x600")
    with pytest.raises(SandboxError, match="start_url: expected a URL"):
        DesktopSandbox(start_url="127.0.0.1:8000")
    with pytest.raises(SandboxError, match="launch.*empty command"):
        DesktopSandbox(launch=[[]])
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(SandboxError, match="DISPLAY is not set"):
        DesktopSandbox(display="env").start()
    with pytest.raises(SandboxError, match="cannot connect to X display :4321"):
        DesktopSandbox(display=":4321").start()


def test_missing_programs_say_what_to_install(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(desktop.shutil, "which", lambda name, *a, **k: None if name == "Xvfb" else real_which(name))
    with pytest.raises(SandboxError, match="apt-get install xvfb"):
        DesktopSandbox().start()
    monkeypatch.setattr(desktop.shutil, "which", real_which)
    monkeypatch.setitem(sys.modules, "pyautogui", None)  # as if it were not installed
    box = DesktopSandbox()
    with pytest.raises(SandboxError, match="pip install pyautogui"):
        box.start()
    assert box._xvfb is not None and box._xvfb.poll() is not None  # the failed start stopped its Xvfb


def test_a_program_that_fails_is_reported_and_nothing_is_left(tmp_path):
    box = DesktopSandbox(launch=[f"{sys.executable} -c 'import sys; sys.exit(\"no such form\")'"])
    with pytest.raises(SandboxError, match="launch\\[0\\] exited with status 1.*no such form"):
        box.start()
    assert box._xvfb.poll() is not None
    with pytest.raises(SandboxError, match="cannot run"):
        DesktopSandbox(launch=[["/nonexistent/program"]]).start()


def test_close_stops_xvfb_and_programs_and_is_idempotent(tmp_path):
    f = Form(tmp_path, screen="800x600")
    box = f.box
    assert box.screen_size() == (800, 600) and Image.open(io.BytesIO(box.screenshot())).size == (800, 600)
    xvfb, (_, app, _) = box._xvfb, box._procs[0]
    display = box.display
    box.close()
    box.close()
    assert xvfb.poll() is not None and app.poll() is not None
    assert not marked_pids(desktop.MARKER, box._token)
    assert f.events("final"), "the program was not asked to stop (SIGTERM) before being killed"
    assert not Path(f"/tmp/.X11-unix/X{display[1:]}").exists() or _nobody_listens(display)
    for action, args in (("click", {"x": 1, "y": 1}), ("wait", {"seconds": 0})):
        with pytest.raises(SandboxError, match="not running"):
            box.act(action, args)
    with pytest.raises(SandboxError, match="not running"):
        box.screenshot()


def _nobody_listens(display: str) -> bool:
    import socket

    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(f"/tmp/.X11-unix/X{display[1:]}")
        return False
    except OSError:
        return True
    finally:
        s.close()


# ---------------------------------------------------------------- a real Chromium window on the display

PAGE = """<!doctype html><html><head><title>Targets</title>
<style>body{margin:0} div{position:absolute;width:80px;height:40px} input{position:absolute}</style></head>
<body><div id=a style="left:100px;top:100px;background:#c00"></div>
<div id=b style="left:700px;top:500px;background:#00c"></div>
<input id=q style="left:300px;top:300px;width:200px;height:30px">
<script>
const send = (q) => fetch('/event?' + new URLSearchParams(q));
document.addEventListener('mousedown', e => send({kind: 'click', x: e.clientX, y: e.clientY, target: e.target.id}));
document.getElementById('q').addEventListener('input', e => send({kind: 'input', value: e.target.value}));
</script></body></html>"""


@pytest.fixture
def page_server():
    events: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlparse(self.path)
            if url.path == "/event":
                events.append({k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()})
                self.send_response(204)
                self.end_headers()
                return
            body = PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/targets.html", events
    server.shutdown()
    server.server_close()


@needs_xdotool
@pytest.mark.skipif(not os.path.exists(desktop.CHROMIUM), reason=f"Chromium is not installed at {desktop.CHROMIUM}")
def test_start_url_clicks_land_on_page_elements(page_server):
    url, events = page_server

    def wait_event(n: int) -> list[dict]:
        deadline = time.monotonic() + 10
        while len(events) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return events

    with DesktopSandbox(start_url=url) as box:
        seen = box.observe()
        (win,) = [w for w in seen["windows"] if w["title"] == "Targets"]
        assert win["box"] == [0, 0, 1280, 720] and seen["focused"] == "Targets"
        img = Image.open(io.BytesIO(box.screenshot()))
        assert img.getpixel((140, 120))[:3] == (204, 0, 0) and img.getpixel((740, 520))[:3] == (0, 0, 204)
        assert "'Targets'" in box.act("click", {"x": 740, "y": 520})
        box.act("click", {"x": 100, "y": 139})  # the top-left and bottom-left pixels of target a
        box.act("click", {"x": 1279, "y": 719})  # the last pixel is the page's too
        got = wait_event(3)
        assert [(e["target"], e["x"], e["y"]) for e in got[:3]] == [("b", "740", "520"), ("a", "100", "139"),
                                                                    ("", "1279", "719")]
        box.act("click", {"x": 400, "y": 315})
        box.act("write", {"message": "hi there"})
        deadline = time.monotonic() + 10
        while not any(e.get("value") == "hi there" for e in events) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(e.get("value") == "hi there" for e in events), events
        chromium = box._procs[0][1]
    assert chromium.poll() is not None

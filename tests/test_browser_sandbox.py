"""The browser sandbox on the real system Chromium: pages served from 127.0.0.1, every action checked by what the
page itself recorded (event coordinates, keys, scroll position), the allow-list, isolation and threading."""

from __future__ import annotations

import importlib.util
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toolpath.deadline import BUDGET_SPENT
from toolpath.sandboxes.base import SandboxError
from toolpath.sandboxes.browser import BrowserSandbox, chromium_path

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None,
                       reason="the playwright package is not installed"),
    pytest.mark.skipif(chromium_path() is None,
                       reason="no Chromium (apt-get install chromium, or set $TOOLPATH_CHROMIUM)"),
]

# Every event the tests look at is recorded by the page, in screen (client) pixels, with its target's id.
MAIN = """<!doctype html><html><head><title>Main page</title><style>
  body { margin: 0; height: 3000px; font: 16px sans-serif; }
  .abs { position: absolute; }
</style></head><body>
<button id="b1" class="abs" style="left:100px; top:100px; width:120px; height:40px">Submit</button>
<input id="t" class="abs" style="left:300px; top:100px; width:200px; height:30px" placeholder="Your name" value="old">
<label for="t" class="abs" style="left:300px; top:70px">Name</label>
<select id="s" class="abs" style="left:550px; top:100px"><option>Red</option><option selected>Green</option></select>
<input id="c" type="checkbox" class="abs" style="left:700px; top:100px" checked>
<div id="box" class="abs" style="left:100px; top:300px; width:60px; height:60px; background:#c33"></div>
<div id="pad" class="abs" style="left:400px; top:250px; width:400px; height:300px; background:#eee"></div>
<a id="next" class="abs" href="/two" style="left:100px; top:600px">Next page</a>
<span id="note" class="abs" style="left:900px; top:600px">Just text</span>
<div id="below" class="abs" style="left:100px; top:2000px">Far below</div>
<script>
  window.events = []; window.keys = [];
  for (const type of ["mousedown", "click", "dblclick", "contextmenu"])
    document.addEventListener(type, (e) => { events.push({type, x: e.clientX, y: e.clientY, target: e.target.id,
                                                          detail: e.detail, button: e.button}); });
  document.addEventListener("contextmenu", (e) => e.preventDefault());
  document.addEventListener("keydown", (e) => keys.push(e.key));
  // a thing dragged with the mouse: it follows the pointer between mousedown and mouseup
  const box = document.getElementById("box"); let grab = null;
  box.addEventListener("mousedown", (e) => { grab = [e.clientX - box.offsetLeft, e.clientY - box.offsetTop]; });
  document.addEventListener("mousemove", (e) => { if (grab) { box.style.left = (e.clientX - grab[0]) + "px";
                                                             box.style.top = (e.clientY - grab[1]) + "px"; } });
  document.addEventListener("mouseup", () => { grab = null; });
  // a swipe pad: where the finger (pointer) went down and came up
  window.swipes = []; let down = null; const pad = document.getElementById("pad");
  pad.addEventListener("pointerdown", (e) => { down = [e.clientX, e.clientY]; });
  pad.addEventListener("pointerup", (e) => { if (down) swipes.push([down, [e.clientX, e.clientY]]); down = null; });
</script></body></html>"""
TWO = """<!doctype html><html><head><title>Page two</title></head><body><h1>Two</h1></body></html>"""


class Site:
    """A local web server in a thread; records the paths it was asked for."""

    def __init__(self, pages: dict[str, str]):
        site = self
        self.requests: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                site.requests.append(self.path)
                body = pages.get(self.path.split("?")[0])
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                data = (body if body is not None else "<h1>not found</h1>").encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def site():
    s = Site({"/": MAIN, "/two": TWO, "/x": "<p>x</p>"})
    yield s
    s.close()


@pytest.fixture(scope="module")
def other():
    s = Site({"/": "<title>Other</title><p>other</p>", "/x": "<p>x</p>"})
    yield s
    s.close()


@pytest.fixture(scope="module")
def shared(site):
    with BrowserSandbox(start_url=site.url + "/", settle=0.02) as box:
        yield box


@pytest.fixture
def box(shared, site):
    """The module's browser on a freshly loaded main page, pointer at the corner."""
    shared.goto(site.url + "/")
    shared.act("moveTo", {"x": 0, "y": 0})
    return shared


def events(box, type_=None):
    return [e for e in box.evaluate("events") if type_ is None or e["type"] == type_]


def centre(box, el_id):
    r = box.evaluate(f"(() => {{ const r = document.getElementById('{el_id}').getBoundingClientRect();"
                     " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    return r


# ---- pointer ------------------------------------------------------------------------------------------

def test_click_lands_on_the_element_drawn_at_the_point(box):
    out = box.act("click", {"x": 160, "y": 120})
    clicks = events(box, "click")
    assert [(c["x"], c["y"], c["target"]) for c in clicks] == [(160, 120, "b1")]
    assert "clicked (160, 120)" in out and "<button> 'Submit'" in out
    box.act("click", {"x": 130, "y": 330})  # the red box
    assert events(box, "click")[-1]["target"] == "box"


def test_click_without_a_point_clicks_where_the_pointer_is(box):
    box.act("moveTo", {"x": 150, "y": 110})
    box.act("click", {})
    assert events(box, "click")[-1]["target"] == "b1"


def test_double_and_right_click(box):
    box.act("doubleClick", {"x": 120, "y": 110})
    dbl = events(box, "dblclick")
    assert len(dbl) == 1 and dbl[0]["target"] == "b1"
    box.act("rightClick", {"x": 50, "y": 50})
    ctx = events(box, "contextmenu")
    assert [(c["x"], c["y"], c["button"]) for c in ctx] == [(50, 50, 2)]
    box.act("click", {"x": 60, "y": 60, "clicks": 3})
    assert max(e["detail"] for e in events(box, "click")) == 3


def test_drag_to_moves_the_draggable_thing(box):
    box.act("moveTo", {"x": 130, "y": 330})  # grab the box at its centre
    out = box.act("dragTo", {"x": 330, "y": 430})
    left, top = box.evaluate("[box.offsetLeft, box.offsetTop]")
    assert (left, top) == (300, 400)  # moved by exactly the drag: +200, +100
    assert "dragged from (130, 330) to (330, 430)" in out


def test_swipe_is_the_finger_movement(box):
    box.act("swipe", {"from_coord": [600, 500], "direction": "up", "amount": 0.25})
    (start, end), = box.evaluate("swipes")
    assert start == [600, 500] and end == [600, 500 - 180]  # up: the finger goes towards the top, 25% of 720
    box.act("swipe", {"from_coord": [450, 300], "to_coord": [750, 320]})
    assert box.evaluate("swipes")[-1] == [[450, 300], [750, 320]]


def test_long_press_holds_the_button(box):
    box.evaluate("window.held = null; pad.addEventListener('mousedown', () => held = performance.now());"
                 "pad.addEventListener('mouseup', () => held = performance.now() - held)")
    box.act("long_press", {"x": 500, "y": 300, "duration": 0.3})
    assert box.evaluate("held") >= 280


def test_a_deadline_cuts_waits_presses_and_typing_short_and_says_so(box):
    out = box.act("wait", {"seconds": 30}, deadline=time.monotonic() + 0.2)
    assert "of the 30 asked" in out and BUDGET_SPENT in out
    out = box.act("long_press", {"x": 500, "y": 300, "duration": 5}, deadline=time.monotonic() + 0.2)
    assert "of the 5 asked" in out
    box.act("click", {"x": 400, "y": 115})
    box.act("hotkey", {"keys": ["ctrl", "a"]})
    box.act("press", {"keys": "backspace"})
    # typing goes in slices with a look at the deadline between them: it stops there and says how far it got
    out = box.act("write", {"message": "y" * 2000}, deadline=time.monotonic() + 0.05)
    typed = int(re.search(r"typed the first (\d+) of 2000 characters", out).group(1))
    assert 0 < typed < 2000 and box.evaluate("t.value") == "y" * typed and BUDGET_SPENT in out
    out = box.act("write", {"message": "z" * 10}, deadline=time.monotonic() - 1)  # spent before it starts
    assert "typed the first 0 of 10 characters" in out and box.evaluate("t.value") == "y" * typed


def test_scroll_sign_follows_pyautogui(box):
    box.act("scroll", {"clicks": -3, "x": 640, "y": 360})  # negative: down
    down = box.evaluate("scrollY")
    assert down >= 200
    out = box.act("scroll", {"clicks": 1})
    assert 0 <= box.evaluate("scrollY") < down  # positive: up
    assert out.startswith("scrolled up 1 notch")


# ---- keyboard -----------------------------------------------------------------------------------------

def test_typing_and_select_all_replaces_the_text(box):
    box.act("click", {"x": 400, "y": 115})
    box.act("hotkey", {"keys": ["ctrl", "a"]})
    box.act("write", {"message": "Ada Lovelace"})
    assert box.evaluate("t.value") == "Ada Lovelace"
    out = box.act("press", {"keys": "backspace", "presses": 3})
    assert box.evaluate("t.value") == "Ada Lovel"
    assert "3 times" in out
    box.act("press", {"keys": ["home", "shift+end"]})
    box.act("write", {"message": "X"})
    assert box.evaluate("t.value") == "X"
    box.act("keyDown", {"key": "shift"})
    box.act("press", {"keys": "b"})
    box.act("keyUp", {"key": "shift"})
    assert box.evaluate("t.value") == "XB"
    assert "Enter" not in box.evaluate("keys")
    box.act("press", {"keys": "enter"})
    assert box.evaluate("keys")[-1] == "Enter"


def test_unknown_key_and_off_screen_point_are_errors(box):
    with pytest.raises(SandboxError, match=r"unknown key 'nosuchkey'.*'enter'"):
        box.act("press", {"keys": ["nosuchkey"]})
    with pytest.raises(SandboxError, match=r"off the screen.*0\.\.1279"):
        box.act("click", {"x": 1280, "y": 10})
    with pytest.raises(SandboxError, match="needs a phone"):
        box.act("open_app", {"name": "Maps"})
    with pytest.raises(SandboxError, match="unknown action"):
        box.act("fly", {})
    assert events(box, "click") == []  # nothing was done by the failed actions


# ---- navigation -----------------------------------------------------------------------------------------

def test_link_click_waits_for_the_next_page_and_back_returns(box, site):
    out = box.act("click", {"x": 110, "y": 608})
    assert box.url == site.url + "/two" and "/two" in out
    assert box.observe()["title"] == "Page two"
    box.act("navigate_back", {})
    assert box.url == site.url + "/"
    assert box.evaluate("document.title") == "Main page"


def test_popup_becomes_the_active_page(site):
    with BrowserSandbox(start_url=site.url + "/") as box:
        box.evaluate("b1.onclick = () => window.open('/two')")
        out = box.act("click", {"x": 160, "y": 120})
        assert "new page" in out
        assert box.url == site.url + "/two" and box.evaluate("document.title") == "Page two"


# ---- observe ---------------------------------------------------------------------------------------------

def test_observe_lists_visible_elements_with_true_boxes(box, site):
    facts = box.observe()
    assert facts["url"] == site.url + "/" and facts["title"] == "Main page" and facts["blocked"] == []
    by_id = {}
    for e in facts["elements"]:
        assert set(e) >= {"id", "tag", "role", "text", "box"}
        by_id.setdefault((e["tag"], e["text"]), e)
    assert [e["id"] for e in facts["elements"]] == list(range(len(facts["elements"])))
    for tag, text, el_id in (("button", "Submit", "b1"), ("a", "Next page", "next"), ("span", "Just text", "note")):
        x1, y1, x2, y2 = by_id[(tag, text)]["box"]
        cx, cy = centre(box, el_id)
        assert x1 <= cx <= x2 and y1 <= cy <= y2
    name = next(e for e in facts["elements"] if e["tag"] == "input" and e.get("type") == "text")
    assert name["value"] == "old" and name["placeholder"] == "Your name" and name["label"] == "Name"
    sel = next(e for e in facts["elements"] if e["tag"] == "select")
    assert sel["options"] == ["Red", "Green"] and sel["selected"] == "Green"
    assert next(e for e in facts["elements"] if e.get("type") == "checkbox")["checked"] is True
    assert by_id[("a", "Next page")]["href"] == site.url + "/two"
    assert all(e["text"] != "Far below" for e in facts["elements"])  # outside the viewport
    box.act("click", {"x": 400, "y": 115})
    assert next(e for e in box.observe()["elements"] if e.get("type") == "text").get("focused") is True


def test_screenshot_is_exactly_the_viewport(box):
    from io import BytesIO

    from PIL import Image

    img = Image.open(BytesIO(box.screenshot()))
    assert img.size == box.screen_size() == (1280, 720)
    assert img.convert("RGB").getpixel((130, 330)) == (204, 51, 51)  # the red box, where the page drew it
    assert "<title>Main page</title>" in box.html()


def test_evaluate_errors_carry_the_js_message(box):
    assert box.evaluate("({a: [1, 2], b: 'x'})") == {"a": [1, 2], "b": "x"}
    with pytest.raises(SandboxError, match="nosuchname is not defined"):
        box.evaluate("nosuchname.foo")


# ---- allow-list, start errors, isolation, threads --------------------------------------------------------

FETCH = "fetch('{url}', {{mode: 'no-cors'}}).then(() => 'ok', () => 'blocked')"


def test_allow_list_blocks_another_server_on_another_port(box, other):
    target = other.url + "/x"
    assert box.evaluate(FETCH.format(url=target)) == "blocked"
    assert "/x" not in other.requests
    assert box.observe()["blocked"] == [target]
    assert box.observe()["blocked"] == []  # reported once
    with pytest.raises(SandboxError, match="not in the allow-list"):
        box.goto(other.url + "/")


def test_allowed_hosts_admits_the_other_server(site, other):
    with BrowserSandbox(start_url=site.url + "/", allowed_hosts=[f"127.0.0.1:{other.port}"]) as box:
        assert box.evaluate(FETCH.format(url=other.url + "/x?allowed")) == "ok"
        assert "/x?allowed" in other.requests
        assert box.goto(other.url + "/") == other.url + "/"
    with BrowserSandbox(start_url=site.url + "/", allowed_hosts="*") as box:
        assert box.evaluate(FETCH.format(url=other.url + "/x?star")) == "ok"


def test_a_local_start_page_reaches_the_files_beside_it_and_nothing_above(tmp_path):
    (tmp_path / "secret.txt").write_text("host secret")
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "index.html").write_text("<title>Local</title><a href='next.html'>next</a>")
    (site_dir / "next.html").write_text("<title>Next</title>")
    (site_dir / "link.txt").symlink_to(tmp_path / "secret.txt")  # a link out of the folder is out
    with BrowserSandbox(start_url=(site_dir / "index.html").as_uri()) as box:
        assert box.goto((site_dir / "next.html").as_uri()).endswith("/site/next.html")
        for outside in ((tmp_path / "secret.txt").as_uri(), "file:///etc/passwd", (site_dir / "link.txt").as_uri()):
            with pytest.raises(SandboxError, match="not in the allow-list"):
                box.goto(outside)


def test_dead_start_url_is_an_error_naming_it(site):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}/"
    s.close()
    with pytest.raises(SandboxError, match=f"start_url {dead} did not load: connection refused"):
        BrowserSandbox(start_url=dead).start()
    with pytest.raises(SandboxError, match=r"/missing answered HTTP 404"):
        BrowserSandbox(start_url=site.url + "/missing").start()
    with pytest.raises(SandboxError, match="start_url"):
        BrowserSandbox(start_url="ftp://example/")


def test_setup_js_runs_after_load(site):
    with BrowserSandbox(start_url=site.url + "/", setup_js="window.ready = document.title + '!'") as box:
        assert box.evaluate("ready") == "Main page!"
    with pytest.raises(SandboxError, match="setup_js failed.*nope"):
        BrowserSandbox(start_url=site.url + "/", setup_js="nope()").start()


def test_acts_from_other_threads(box):
    with ThreadPoolExecutor(max_workers=3) as pool:
        outs = list(pool.map(lambda p: box.act("click", {"x": p[0], "y": p[1]}), [(110, 110), (150, 120), (200, 130)]))
    assert all(o.startswith("clicked") for o in outs)
    assert sorted((c["x"], c["y"]) for c in events(box, "click")) == [(110, 110), (150, 120), (200, 130)]
    shot = []
    t = threading.Thread(target=lambda: shot.append(box.screenshot()))
    t.start()
    t.join()
    assert shot[0][:8] == b"\x89PNG\r\n\x1a\n"


def test_two_sandboxes_share_no_cookies_or_storage(site):
    with BrowserSandbox(start_url=site.url + "/") as a:
        a.evaluate("document.cookie = 'k=1; max-age=3600'; localStorage.setItem('k', '1')")
        assert a.evaluate("document.cookie") == "k=1"
        with BrowserSandbox(start_url=site.url + "/") as b:
            assert b.evaluate("document.cookie") == ""
            assert b.evaluate("localStorage.getItem('k')") is None


def test_close_is_idempotent_and_refuses_later_calls(site):
    box = BrowserSandbox(start_url=site.url + "/").start()
    box.close()
    box.close()
    with pytest.raises(SandboxError, match="not running"):
        box.screenshot()


def test_the_gui_tools_drive_the_browser_from_their_thread_pool(box):
    from toolpath.tools.registry import ToolContext, ToolError, get_tool

    ctx = ToolContext(sandbox=box)
    out = get_tool("click").call({"x": 400, "y": 115}, ctx)  # tools with a timeout run in a pool thread
    assert out.content.startswith("clicked (400, 115) on <input[text]>")
    get_tool("hotkey").call({"keys": ["ctrl", "a"]}, ctx)
    get_tool("write").call({"message": "via tools"}, ctx)
    assert box.evaluate("t.value") == "via tools"
    get_tool("swipe").call({"from_coord": [600, 400], "direction": "right", "amount": 0.1}, ctx)
    assert box.evaluate("swipes")[-1] == [[600, 400], [728, 400]]
    with pytest.raises(ToolError, match="off the screen"):
        get_tool("click").call({"x": 10, "y": 9999}, ctx)


def test_browser_example_signs_in_with_a_screenshot_per_step(tmp_path):
    """`toolpath run examples/browser.yaml`, as a user runs it: popup dismissed, form filled, signed in."""
    import json

    from conftest import toolpath_cli
    from PIL import Image

    from toolpath.runs import Store

    home = tmp_path / "home"
    from conftest import ROOT

    r = toolpath_cli("run", ROOT / "examples" / "browser.yaml", "--json", home=home, cwd=tmp_path)  # not the root
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["status"], out["answer"], out["steps"]) == ("finished", "success", 3)
    with Store(home) as store:
        steps = store.steps(out["run_id"])
    assert "web browser" in steps[0]["payload"]["messages"][0]["content"]  # the task step names the platform
    finish = [s for s in steps if s["node"] == "finish"][0]
    assert finish["payload"]["final_state"]["url"].endswith("/signin/account.html?user=alice")
    assert finish["payload"]["final_state"]["title"].startswith("Signed in as alice")
    shots = [img for s in steps if s["node"] in ("observe", "finish")
             for m in s["payload"]["messages"] for img in m.get("images", [])]
    assert [s["name"] for s in shots] == ["screen_1.png", "screen_2.png", "screen_3.png", "screen_final.png"]
    for ref in shots:
        with Image.open(ref["path"]) as im:
            assert im.size == (1280, 720)
    ops = [c["name"] for s in steps if s["node"] == "policy" for c in s["payload"]["messages"][0]["tool_calls"]]
    assert ops == ["click", "click", "write", "click", "write", "click", "terminate"]

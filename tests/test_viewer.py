"""The trace viewer as a user meets it: a store with real runs (react, fast-slow, visual-program) and runs put
with the payloads the embodied and computer-use agents record, served on a free port, read over HTTP and
clicked through in a real Chromium (Playwright on the system browser)."""

import http.client
import io
import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from PIL import Image, ImageDraw

from toolpath.agents.episode import run_episode
from toolpath.policies.scripted import ScriptedPolicy
from toolpath.runs import Store
from toolpath.spec import parse_spec

LONG = 180  # steps in the long run: four pages of 50
XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'


# ---- the store ---------------------------------------------------------------------------------------------

def _png(draw, size=(160, 120)) -> bytes:
    im = Image.new("RGB", size, (128, 128, 128))
    draw(ImageDraw.Draw(im))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def _put_run(store, agent, task_id, steps, status="finished", answer=None, error=None, **fields):
    run_id = store.create_run(json.dumps({"id": task_id}), task_id, "put:" + agent, agent)
    for seq, (node, payload) in enumerate(steps):
        store.put_step(run_id, seq, node, payload, time.time(), 0.01 * seq, tokens_in=3, tokens_out=2)
    store.update_run(run_id, status=status, answer=answer, error=error, steps=len(steps), **fields)
    time.sleep(0.01)  # distinct `created`, so "newest first" has one answer
    return run_id


def _embodied(store):
    """Shapes copied from a real embodied run in ~/.toolpath: observe (camera + depth), reason (trace_N.png),
    plan, execute (a waypoint's tool call), finish (final_state)."""
    cam = store.put_artifact(_png(lambda d: (d.rectangle((60, 40, 80, 60), fill="red"),
                                             d.ellipse((90, 70, 130, 100), fill="blue"))), "camera_1.png", "image/png")
    depth = store.put_artifact(_png(lambda d: d.rectangle((0, 0, 80, 120), fill=(40, 40, 40))), "depth_1.png",
                               "image/png")
    trace = store.put_artifact(_png(lambda d: d.line((70, 50, 110, 85), fill="yellow", width=3)), "trace_1.png",
                               "image/png")
    ref = lambda a: a.model_dump()  # noqa: E731
    return _put_run(store, "embodied", "pick-place", [
        ("task", {"messages": [{"role": "system", "content": "You are the spatial reasoner of a robot arm."},
                               {"role": "user", "content": "put the red cube on the blue plate"}]}),
        ("observe", {"messages": [{"role": "user", "name": "observe",
                                   "content": "camera 640x480; depth 0.800–3.737 m",
                                   "images": [ref(cam), ref(depth)]}]}),
        ("policy", {"messages": [{"role": "assistant", "content": "<answer><point>[[620, 532]]</point></answer>"}],
                    "raw": "<answer><point>[[620, 532]]</point></answer>", "question": "trace", "issues": [],
                    "latency": 0.1}),
        ("reason", {"messages": [{"role": "assistant", "name": "reason", "images": [ref(trace)],
                                  "content": "in image pixels: pick [396, 255] (trace), place [407, 346]"}]}),
        ("plan", {"messages": [{"role": "assistant", "name": "plan", "content": "grasp at (0.384, 0.139, 0.025)"}],
                  "plan": {"pick_world": [0.3843, 0.1373, 0.045], "release": [0.5573, 0.142, 0.0479],
                           "clearance": 0.15}}),
        ("execute", {"messages": [{"role": "assistant", "content": "waypoint 1 of 10",
                                   "tool_calls": [{"id": "a1_1", "name": "gripper", "arguments": {"command": "open"}}]},
                                  {"role": "tool", "content": "opened (width 80 mm)", "tool_call_id": "a1_1",
                                   "name": "gripper"}],
                     "observations": [{"call_id": "a1_1", "tool": "gripper", "content": "opened (width 80 mm)"}]}),
        ("finish", {"messages": [{"role": "assistant", "name": "finish", "content": "final state: success"}],
                    "final_state": {"pick": "red cube", "target": "blue plate", "success": True,
                                    "judged_by": "simulator"}}),
    ], answer="success: the red cube is on the blue plate")


def _computer_use(store):
    """Shapes copied from a real computer-use run: observe (screen_N.png), policy (ScaleCUA raw), act."""
    screen = store.put_artifact(_png(lambda d: (d.rectangle((20, 20, 140, 40), outline="black"),
                                                d.text((30, 25), "Sign in", fill="black")), (320, 200)),
                                "screen_1.png", "image/png")
    return _put_run(store, "computer_use", "browser-signin", [
        ("task", {"messages": [{"role": "system", "content": "You are a GUI agent operating a web browser."},
                               {"role": "user", "content": 'Sign in with username "alice"'}]}),
        ("observe", {"messages": [{"role": "user", "name": "observe", "content": "320x200 pixels\nurl: file:///signin",
                                   "images": [screen.model_dump()]}]}),
        ("policy", {"messages": [{"role": "assistant", "content": "Press \"Sign in\"",
                                  "tool_calls": [{"id": "dom1_1", "name": "click", "arguments": {"x": 80, "y": 30}}]}],
                    "raw": "<operation>Press \"Sign in\"</operation>\n<action>\nclick(x=80, y=30)\n</action>",
                    "issues": [], "latency": 0.001}),
        ("act", {"messages": [{"role": "tool", "content": "clicked (80, 30) on <button> 'Sign in'",
                               "tool_call_id": "dom1_1", "name": "click"}],
                 "observations": [{"call_id": "dom1_1", "tool": "click",
                                   "content": "clicked (80, 30) on <button> 'Sign in'"}]}),
    ], answer="success")


def _long(store):
    steps = [("task", {"messages": [{"role": "user", "content": "count to a hundred"}]})]
    for i in range(1, LONG):
        if i % 2:
            steps.append(("policy", {"messages": [{"role": "assistant", "content": f"thought number {i}",
                                                   "tool_calls": [{"id": f"c{i}", "name": "calculator",
                                                                   "arguments": {"expression": f"{i}+1"}}]}],
                                     "raw": f"raw output {i}"}))
        else:
            steps.append(("tools", {"messages": [{"role": "tool", "content": f"observation {i}",
                                                  "tool_call_id": f"c{i - 1}"}],
                                    "observations": [{"call_id": f"c{i - 1}", "tool": "calculator",
                                                      "content": f"observation {i}"}]}))
    return _put_run(store, "react", "long-task", steps, status="budget_exhausted", error="reached max_steps")


def _visual_program(store):
    from toolpath.sandboxes.process import bwrap_works

    if bwrap_works() is not None:
        return None
    spec = parse_spec({"id": "vp", "instruction": "How wide is the image, in pixels?",
                       "inputs": {"images": [str(ROOT / "examples" / "assets" / "bars.png")]},
                       "agent": {"name": "visual_program", "params": {}}, "model": "scripted:none.yaml"})
    prog = ("Here is my program.\n```python\ndef program(scene):\n    im = scene.images[0]\n"
            "    return [im.crop((0, 0, 40, 30)), 'view']\n```")
    return run_episode(spec, store, policy=ScriptedPolicy([prog, '{"answer": "320"}'])).run_id


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """One store for the whole module, the viewer on a free port over it."""
    from toolpath.viewer import serve

    base = tmp_path_factory.mktemp("viewer")
    home = base / "home"
    env = {**os.environ, "TOOLPATH_HOME": str(home), "PYTHONPATH": str(ROOT)}
    # The fast-slow example runs in a subprocess (as `toolpath run` does) while the rest are made here.
    edit = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "run", str(ROOT / "examples" / "edit.yaml"),
                             "--json"], cwd=base, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = Store(home)
    ids = {}
    spec = parse_spec({"id": "arith", "instruction": "What is 6 * 7?", "model": "scripted:none.yaml",
                       "evaluator": {"name": "numeric", "expected": 42}})
    ids["react"] = run_episode(spec, store, policy=ScriptedPolicy([
        '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>',
        '<tool_call>{"name": "final_answer", "arguments": {"answer": "42"}}</tool_call>'])).run_id
    warp = json.dumps({"name": "warp", "arguments": {"to": XSS}})
    done = '<tool_call>{"name": "final_answer", "arguments": {"answer": "done"}}</tool_call>'
    ids["xss"] = run_episode(parse_spec({"id": "xss", "instruction": XSS, "model": "scripted:none.yaml"}), store,
                             policy=ScriptedPolicy([f"{XSS}<tool_call>{warp}</tool_call>", done])).run_id
    ids["visual_program"] = _visual_program(store)
    ids["embodied"] = _embodied(store)
    ids["computer_use"] = _computer_use(store)
    ids["long"] = _long(store)
    eval_id = store.create_eval("arith", "put", {"limit": 60}, 60)
    for i in range(60):
        store.put_eval_sample(eval_id, f"arith/{i}", ids["react"] if i == 59 else ids["long"], "add", "finished",
                              float(i % 2), 10, 0.5, {"answer": f"answer {i}", "error": None})
    ids["eval"] = eval_id
    out, err = edit.communicate(timeout=120)
    assert edit.returncode == 0, err
    ids["fast_slow"] = json.loads(out)["run_id"]
    store.close()
    server, url = serve(home, port=0)
    yield {"url": url.rstrip("/"), "home": home, "ids": ids}
    server.shutdown()
    server.server_close()


def get(site, path, headers=None):
    """(status, content type, body) without following or normalising anything: the path goes out as written."""
    host, port = site["url"].split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, r.getheader("Content-Type", ""), body


def get_json(site, path):
    status, ctype, body = get(site, path)
    assert ctype.startswith("application/json"), (path, ctype)
    return status, json.loads(body)


# ---- over HTTP ---------------------------------------------------------------------------------------------

def test_runs_newest_first_and_evals_with_progress(site):
    status, runs = get_json(site, "/api/runs?limit=3")
    assert status == 200 and runs["total"] == 7 - (site["ids"]["visual_program"] is None) and runs["next"] == 3
    created = [r["created"] for r in runs["runs"]]
    assert created == sorted(created, reverse=True)
    status, evals = get_json(site, "/api/evals")
    ev = evals["evals"][0]
    assert (ev["id"], ev["benchmark"], ev["n"], ev["done"], ev["score"]) == (site["ids"]["eval"], "arith", 60, 60, 0.5)
    status, _, html = get(site, "/")
    text = html.decode()
    assert status == 200 and site["ids"]["fast_slow"] in text and site["ids"]["eval"] in text


def test_steps_come_a_page_at_a_time_in_order(site):
    rid = site["ids"]["long"]
    _, first = get_json(site, f"/api/runs/{rid}/steps")
    assert (first["total"], first["offset"], first["limit"], first["next"]) == (LONG, 0, 50, 50)
    assert [s["seq"] for s in first["steps"]] == list(range(50))
    _, last = get_json(site, f"/api/runs/{rid}/steps?offset=150&limit=50")
    assert [s["seq"] for s in last["steps"]] == list(range(150, LONG)) and last["next"] is None
    assert last["steps"][-2]["payload"]["observations"][0]["content"] == f"observation {LONG - 2}"
    _, past = get_json(site, f"/api/runs/{rid}/steps?offset=1000")
    assert past["steps"] == [] and past["next"] is None
    # the run page inlines only the first page; the rest is left to the API
    _, _, html = get(site, f"/runs/{rid}")
    assert b"thought number 49" in html and b"thought number 51" not in html
    _, samples = get_json(site, f"/api/evals/{site['ids']['eval']}/samples?offset=50")
    assert len(samples["samples"]) == 10 and samples["samples"][-1]["run_id"] == site["ids"]["react"]


def test_unknown_ids_and_paths_are_404_pages_that_say_what(site):
    for path, said in [("/runs/no-such-run", "no run with id 'no-such-run'"),
                       ("/evals/e-missing", "no eval with id 'e-missing'"),
                       ("/nowhere", "no page at /nowhere"), ("/runs/a/b", "no page at /runs/a/b")]:
        status, ctype, body = get(site, path)
        assert status == 404 and ctype.startswith("text/html"), path
        assert said.replace("'", "&#x27;") in body.decode(), path
    status, err = get_json(site, "/api/runs/no-such-run/steps")
    assert status == 404 and "no run with id 'no-such-run'" in err["error"]
    status, err = get_json(site, "/api/evals/e-missing/samples")
    assert status == 404 and "no eval" in err["error"]


@pytest.mark.parametrize("query,named", [("limit=0", "limit=0"), ("limit=abc", "limit='abc'"),
                                         ("offset=-3", "offset=-3"), ("limit=10001", "limit=10001")])
def test_bad_paging_is_a_400_naming_the_parameter(site, query, named):
    status, err = get_json(site, f"/api/runs/{site['ids']['long']}/steps?{query}")
    assert status == 400 and named in err["error"]


def test_artifacts_only_for_listed_digests_and_no_way_out_of_the_store(site):
    home = site["home"]
    with sqlite3.connect(home / "runs.db") as db:
        sha, path, mime = db.execute("SELECT sha256, path, mime FROM artifacts WHERE mime = 'image/png'").fetchone()
        # a row whose recorded path leaves the artifact folder (a tampered or foreign store) is not served
        db.execute("INSERT OR REPLACE INTO artifacts VALUES (?, ?, 'text/plain', 1, 0)",
                   ("f" * 64, str(home / "runs.db")))
    status, ctype, body = get(site, f"/artifacts/{sha}")
    assert status == 200 and ctype == mime and body == open(path, "rb").read()
    assert body[:8] == b"\x89PNG\r\n\x1a\n"
    for bad in ["/artifacts/" + "0" * 64, "/artifacts/" + "f" * 64, "/artifacts/../runs.db",
                "/artifacts/%2e%2e/runs.db",
                "/artifacts/..%2f..%2f..%2fetc%2fpasswd", f"/artifacts/{sha[:2]}/{sha}", f"/artifacts/{sha}%00.png",
                "/artifacts/" + sha[:-1] + "/", "/static/../server.py", "/static/%2e%2e%2fserver.py",
                "/static/..%2fdata.py", "/%2e%2e/%2e%2e/etc/passwd"]:
        status, _, body = get(site, bad)
        assert status == 404, bad
        assert b"SQLite format" not in body and b"root:" not in body and b"import" not in body, bad


def test_only_our_host_name_and_only_reads(site):
    assert get(site, "/", {"Host": "evil.example:80"})[0] == 403  # DNS rebinding
    host, port = site["url"].split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/api/runs", body=b"{}")
    assert conn.getresponse().status == 405
    conn.close()


def test_model_output_is_escaped_in_the_html(site):
    host, port = site["url"].split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", f"/runs/{site['ids']['xss']}")
    csp = conn.getresponse().getheader("Content-Security-Policy", "")
    conn.close()
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    _, _, html = get(site, f"/runs/{site['ids']['xss']}")
    text = html.decode()
    assert "<script>window.__xss" not in text and "onerror=\"window" not in text
    assert "&lt;script&gt;window.__xss" in text  # the task header, escaped
    assert "\\u003cscript\\u003ewindow.__xss" in text  # the inlined first page, unable to close its tag


# ---- in Chromium -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def page():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (the gui extra)")
    from toolpath.sandboxes.browser import CHROMIUM_ARGS, chromium_path

    exe = chromium_path()
    if exe is None:
        pytest.skip("no Chromium on PATH (Debian package chromium) and $TOOLPATH_CHROMIUM unset")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        # bypass_csp: Playwright's wait_for_function evaluates strings, which the viewer's CSP forbids; the
        # escaping tests below then show that escaping alone keeps model output from running.
        context = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True)
        # offline: the page must need nothing but the viewer itself
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("http://127.0.0.1")
                      else route.abort())
        pg = context.new_page()
        pg.errors = []
        pg.on("pageerror", lambda err: pg.errors.append(str(err)))
        pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
        yield pg
        browser.close()


def open_run(page, site, key):
    page.goto(f"{site['url']}/runs/{site['ids'][key]}")
    page.wait_for_selector("body[data-first-screen=ready]")


def images_loaded(page, selector="figure.artifact img"):
    page.locator(selector).last.scroll_into_view_if_needed()
    page.wait_for_function(f"[...document.querySelectorAll({selector!r})].every(i => i.complete)")
    return page.eval_on_selector_all(selector, "els => els.map(i => i.naturalWidth)")


def test_click_through_from_the_list_to_a_run(page, site):
    page.goto(site["url"] + "/")
    rid = site["ids"]["react"]
    page.click(f"#runs a[href='/runs/{rid}']")
    page.wait_for_selector("body[data-first-screen=ready]")
    assert page.url.endswith(f"/runs/{rid}")
    assert page.inner_text(".f-status") == "finished" and page.inner_text(".f-answer") == "42"
    assert page.inner_text(".f-agent") == "react" and " in / " in page.inner_text(".f-tokens")
    steps = page.locator("section.step")
    assert steps.count() == 5 and page.inner_text("#step-count") == "(5 of 5)"
    policy = page.inner_text("#step-1")
    assert "calculator" in policy and '"expression": "6 * 7"' in policy  # the call and its arguments
    assert '<tool_call>{"name": "calculator"' in policy  # the raw policy output
    assert "42" in page.inner_text("#step-2 .obs")
    assert page.locator("#load-more").is_hidden()
    assert page.errors == []


def test_errors_are_marked_and_model_text_stays_text(page, site):
    open_run(page, site, "xss")
    obs = page.locator("#step-2 .obs.error")
    assert obs.count() == 1 and "unknown tool 'warp'" in obs.inner_text()
    assert page.locator("#step-2 .badge.error").inner_text() == "error"
    assert XSS in page.inner_text("#step-0")  # shown literally…
    assert page.evaluate("window.__xss") is None  # …and never run
    assert page.locator("section.step img[src='x']").count() == 0


def test_fast_slow_run_shows_its_search_tree_and_edited_images(page, site):
    open_run(page, site, "fast_slow")
    tree = page.locator("#step-2 .search-tree")
    assert tree.count() == 1 and tree.locator("li.tnode").count() >= 3
    goal = tree.locator("li.tnode.status-goal > .tline")
    assert goal.count() == 1 and "goal" in goal.inner_text()
    # the goal sits under its parent: the chosen toolpath is a branch of the tree, highlighted to the root
    assert tree.locator("ul.tree > li.tnode.on-path li.tnode.on-path.status-goal").count() == 1
    assert "Object Recoloration" in page.inner_text("#step-2")
    assert "recolor red cup" in page.inner_text("#step-1 .chain")
    widths = images_loaded(page)
    assert len(widths) >= 3 and all(w > 0 for w in widths)  # input photo + one edited image per subtask
    assert "edited image: s1_recolor.png" in page.inner_text("#step-2 figcaption")


def test_spatial_embodied_and_gui_runs_show_their_pictures(page, site):
    if site["ids"]["visual_program"]:
        open_run(page, site, "visual_program")
        assert "rendered view" in page.inner_text("section.node-tools figcaption")
        assert all(w > 0 for w in images_loaded(page, "section.node-tools figure.artifact img"))
    open_run(page, site, "embodied")
    assert "drawn trace: trace_1.png" in page.inner_text("#step-3 figcaption")
    assert page.locator("#step-1 figcaption").all_inner_texts() == ["camera: camera_1.png", "depth: depth_1.png"]
    assert all(w > 0 for w in images_loaded(page))
    assert "clearance" in page.inner_text("#step-4 .plan") and "simulator" in page.inner_text("#step-6 .final-state")
    assert '"command": "open"' in page.inner_text("#step-5 .calls")
    open_run(page, site, "computer_use")
    assert page.inner_text("#step-1 figcaption") == "screen: screen_1.png"
    assert images_loaded(page) == [320]
    assert "click(x=80, y=30)" in page.inner_text("#step-2 details.raw")


def test_a_long_run_loads_page_by_page_as_you_scroll(page, site, tmp_path):
    open_run(page, site, "long")
    steps = page.locator("section.step")
    assert steps.count() == 50 and page.inner_text("#step-count") == f"(50 of {LONG})"
    shot = tmp_path / "viewer-long-run.png"
    page.screenshot(path=str(shot))
    print(f"screenshot of the run page: {shot}")
    assert shot.stat().st_size > 10_000
    page.mouse.wheel(0, 200_000)  # scrolling to the end brings the next page
    page.wait_for_function("document.querySelectorAll('section.step').length >= 100")
    page.locator("#load-more").click()  # or the button does
    page.wait_for_function("document.querySelectorAll('section.step').length >= 150")
    for _ in range(5):
        if steps.count() == LONG:
            break
        page.mouse.wheel(0, 200_000)
        page.wait_for_timeout(200)
    page.wait_for_function(f"document.querySelectorAll('section.step').length === {LONG}")
    seqs = page.eval_on_selector_all("section.step", "els => els.map(e => +e.dataset.seq)")
    assert seqs == list(range(LONG))  # each step once, in order
    assert f"observation {LONG - 2}" in page.inner_text(f"#step-{LONG - 2}")
    assert page.locator("#load-more").is_hidden() and page.inner_text("#step-count") == f"({LONG} of {LONG})"


def test_eval_samples_are_paged_and_link_to_their_runs(page, site):
    page.goto(f"{site['url']}/evals/{site['ids']['eval']}")
    assert page.locator("#samples tbody tr").count() == 50
    page.click("a.pager-next")
    assert page.locator("#samples tbody tr").count() == 10
    page.click(f"#samples a[href='/runs/{site['ids']['react']}']")
    page.wait_for_selector("body[data-first-screen=ready]")
    assert "6 * 7" in page.inner_text("#step-1")
    page.goto(f"{site['url']}/runs/no-such-run")
    assert "no run with id 'no-such-run'" in page.inner_text("main")


def test_real_embodied_and_computer_use_runs_render(page, tmp_path):
    """The two examples run for real (`toolpath run`, in parallel), then viewed: camera, depth, the drawn trace
    and the final camera of the pick-and-place; every screenshot of the browser sign-in."""
    pytest.importorskip("pybullet", reason="the robot extra (pybullet) is not installed")
    from toolpath.viewer import serve

    home = tmp_path / "home"
    env = {**os.environ, "TOOLPATH_HOME": str(home), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "toolpath.cli", "run", str(ROOT / "examples" / name), "--json"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("pick_place.yaml", "browser.yaml")]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode in (0, 1), err  # 1: the episode ended unsuccessfully, still a run to look at
    embodied, gui = (json.loads(out)["run_id"] for out, _ in outs)
    server, url = serve(home, port=0)
    try:
        page.goto(f"{url}runs/{embodied}")
        page.wait_for_selector("body[data-first-screen=ready]")
        captions = " ".join(page.locator("figcaption").all_inner_texts())
        for want in ("camera: camera_1.png", "depth: depth_view_1.png", "drawn trace: trace_1.png", "final camera"):
            assert want in captions, want
        assert all(w > 0 for w in images_loaded(page))
        assert page.locator("section.node-plan .plan").count() >= 1
        assert page.locator("section.node-finish .final-state").count() == 1
        page.goto(f"{url}runs/{gui}")
        page.wait_for_selector("body[data-first-screen=ready]")
        shots = page.locator("figcaption").all_inner_texts()
        assert "screen: screen_1.png" in shots and any("final screen" in c for c in shots)
        assert all(w > 0 for w in images_loaded(page))
        assert "click(" in page.inner_text("section.node-policy details.raw")
    finally:
        server.shutdown()
        server.server_close()


def test_a_run_stored_with_nan_shows_its_steps(page, tmp_path):
    """A store written before payloads were kept strict holds bare NaN and Infinity; the page must still draw
    every step (the browser's JSON.parse refuses both), the numbers shown as null."""
    from toolpath.viewer import serve

    home = tmp_path / "home"
    store = Store(home)
    run_id = _put_run(store, "react", "old-store", [
        ("task", {"messages": [{"role": "user", "content": "click the middle"}]}),
        ("policy", {"messages": [{"role": "assistant", "content": "clicking",
                                  "tool_calls": [{"id": "c1", "name": "click", "arguments": {"x": 1, "y": 2}}]}]}),
        ("tools", {"messages": [{"role": "tool", "content": "clicked", "tool_call_id": "c1"}]})])
    store.close()
    with sqlite3.connect(home / "runs.db") as db:
        db.execute("UPDATE steps SET payload = replace(replace(payload, '\"x\": 1', '\"x\": NaN'), '\"y\": 2', "
                   "'\"y\": Infinity') WHERE run_id = ? AND seq = 1", (run_id,))
        assert "NaN" in db.execute("SELECT payload FROM steps WHERE seq = 1").fetchone()[0]
    server, url = serve(home, port=0)
    try:
        page.goto(f"{url}runs/{run_id}")
        page.wait_for_selector("body[data-first-screen=ready]")
        assert page.locator("section.step").count() == 3 and page.inner_text("#step-count") == "(3 of 3)"
        assert '"x": null' in page.inner_text("#step-1 .calls")
    finally:
        server.shutdown()
        server.server_close()


def test_a_home_without_a_store_reads_as_empty_until_a_run_appears(tmp_path):
    """The viewer opens the store read-only: it creates nothing, and shows runs once something else writes them."""
    from toolpath.viewer import serve

    home = tmp_path / "home"
    server, url = serve(home, port=0)
    try:
        site = {"url": url.rstrip("/")}
        assert get_json(site, "/api/runs") == (200, {"total": 0, "offset": 0, "limit": 50, "runs": [], "next": None})
        assert not home.exists()
        with Store(home) as store:
            run_id = _put_run(store, "react", "later", [("task", {"messages": [{"role": "user", "content": "hi"}]})])
        status, runs = get_json(site, "/api/runs")
        assert status == 200 and [r["id"] for r in runs["runs"]] == [run_id]
        assert get_json(site, f"/api/runs/{run_id}/steps")[1]["total"] == 1
    finally:
        server.shutdown()
        server.server_close()

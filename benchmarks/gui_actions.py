"""GUI actions on a real screen: does a click in each coordinate convention land on its target, and how long
does each action take, against a raw Playwright `page.mouse.click` measured in the same run.

    python benchmarks/gui_actions.py [--targets 200] [--reps 40] [--seed 0] [--desktop]

A local page (served from 127.0.0.1) holds `--targets` random rectangles, 12 to 100 px a side, seeded. For each
convention (absolute pixels of the smart_resized image, normalized, grid1000) the centre of each target in
screen pixels is written as a model would (CoordinateSpace.from_screen, rounded as the convention is), turned
back into screen pixels (to_screen), clicked through the sandbox's `act`, and the page reports which element
the click hit. Goal: every target hit in every convention.

Latency: median and p90 of click (the hit test's clicks), write, press, scroll, screenshot and observe, with the
sandbox's default `settle` and with settle=0 (its own overhead), and the ratio of the medians to the raw click.

--desktop does the same on toolpath.sandboxes.desktop.DesktopSandbox (its own Xvfb, the page in a Chromium
window) when that module is present, against the same baseline, and prints for reference a click sent as raw XTest
events with python-xlib (what pyautogui sends) on the same display.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

W, H = 1280, 720
HIT_WAIT = 3.0  # seconds to wait for the page to report a click


def targets(n: int, seed: int, lo: int = 12, hi: int = 100) -> list[tuple[int, int, int, int]]:
    """n non-overlapping (left, top, width, height) rectangles inside the screen, sides log-uniform in [lo, hi]."""
    rng = random.Random(seed)
    out: list[tuple[int, int, int, int]] = []
    gap = 2
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 200_000:
            raise RuntimeError(f"could not place {n} targets on {W}x{H}; ask for fewer")
        # the first tenth are the smallest targets, so every run has some at the lower bound
        w = lo if len(out) < n // 10 else round(lo * (hi / lo) ** rng.random())
        h = lo if len(out) < n // 10 else round(lo * (hi / lo) ** rng.random())
        x, y = rng.randint(0, W - w), rng.randint(0, H - h)
        if all(x + w + gap <= a or a + c + gap <= x or y + h + gap <= b or b + d + gap <= y for a, b, c, d in out):
            out.append((x, y, w, h))
    return out


def targets_page(rects) -> str:
    divs = "\n".join(f'<div id="t{i}" role="button" style="left:{x}px;top:{y}px;width:{w}px;height:{h}px;'
                     f'background:hsl({i * 37 % 360},60%,60%)"></div>' for i, (x, y, w, h) in enumerate(rects))
    return f"""<!doctype html><html><head><title>Targets</title><style>
body {{ margin: 0; overflow: hidden; background: #fff; }} div {{ position: absolute; }}
</style></head><body>{divs}
<script>document.addEventListener('click', (e) => fetch('/hit', {{method: 'POST',
  body: JSON.stringify({{id: e.target.id || e.target.tagName, x: e.clientX, y: e.clientY}})}}));</script>
</body></html>"""


LATENCY_PAGE = """<!doctype html><html><head><title>Latency</title><style>body { margin: 0; height: 4000px; }
textarea { position: fixed; left: 40px; top: 40px; width: 600px; height: 200px; }</style></head>
<body><textarea id="t"></textarea><p style="margin-top: 300px">scroll me</p></body></html>"""


class Site:
    """The pages, and the clicks the page posts back to /hit."""

    def __init__(self, pages: dict[str, str]):
        site = self
        self.hits: list[dict] = []
        self.cond = threading.Condition()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = pages.get(self.path, "").encode()
                self.send_response(200 if self.path in pages else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                data = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                self.send_response(204)
                self.end_headers()
                with site.cond:
                    site.hits.append(data)
                    site.cond.notify_all()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_hit(self, count: int) -> dict | None:
        """The hit number `count` (0-based), once the page has posted it; None if it never comes."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.hits) > count, timeout=HIT_WAIT)
            return self.hits[count] if len(self.hits) > count else None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def stats(xs: list[float]) -> tuple[float, float]:
    """(median, p90) in milliseconds."""
    xs = sorted(xs)
    return statistics.median(xs) * 1000, xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))] * 1000


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def hit_test(box, site: Site, rects) -> tuple[dict, list[float]]:
    """{convention: (hits, max error px)} and every click's seconds, clicking each target's centre per convention."""
    from toolpath.coords import CONVENTIONS, CoordinateSpace

    results, clicks = {}, []
    for conv in CONVENTIONS:
        space = CoordinateSpace(conv, *box.screen_size())
        hits, worst = 0, 0
        for i, (x, y, w, h) in enumerate(rects):
            px, py = x + w // 2, y + h // 2
            sx, sy = space.to_screen(*space.from_screen(px, py))  # as the model writes it, then executed
            worst = max(worst, abs(sx - px), abs(sy - py))
            n = len(site.hits)
            clicks.append(timed(lambda sx=sx, sy=sy: box.act("click", {"x": sx, "y": sy})))
            hit = site.wait_hit(n)
            hits += hit is not None and hit.get("id") == f"t{i}"
        results[conv] = (hits, worst, space)
    return results, clicks


def latencies(box, reps: int) -> dict[str, list[float]]:
    """write, press, scroll on the latency page (the textarea focused first)."""
    box.act("click", {"x": 100, "y": 100})
    out: dict[str, list[float]] = {"write": [], "press": [], "scroll": []}
    for i in range(reps):
        out["write"].append(timed(lambda: box.act("write", {"message": "hello"})))
        out["press"].append(timed(lambda: box.act("press", {"keys": "backspace"})))
        out["scroll"].append(timed(lambda i=i: box.act("scroll", {"clicks": -1 if i % 2 == 0 else 1,
                                                                 "x": 900, "y": 500})))
    return out


def raw_playwright_click(url: str, reps: int) -> list[float]:
    """The baseline: page.mouse.click on the same page, in Playwright's own sync API, nothing around it."""
    from playwright.sync_api import sync_playwright

    from toolpath.sandboxes.browser import CHROMIUM_ARGS, chromium_path

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = b.new_page(viewport={"width": W, "height": H}, device_scale_factor=1)
        page.goto(url)
        out = [timed(lambda i=i: page.mouse.click(640 + i % 7, 360)) for i in range(reps)]
        b.close()
    return out


def raw_xtest_click(display: str, reps: int) -> list[float]:
    import os
    import tempfile

    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib.ext import xtest

    # The sandbox's own Xvfb wants no cookie; python-xlib still insists on reading an authority file.
    with tempfile.NamedTemporaryFile() as auth:
        old, os.environ["XAUTHORITY"] = os.environ.get("XAUTHORITY"), auth.name
        try:
            d = xdisplay.Display(display)
        finally:
            if old is None:
                os.environ.pop("XAUTHORITY")
            else:
                os.environ["XAUTHORITY"] = old

    def click(i: int) -> None:
        xtest.fake_input(d, X.MotionNotify, x=640 + i % 7, y=360)
        xtest.fake_input(d, X.ButtonPress, 1)
        xtest.fake_input(d, X.ButtonRelease, 1)
        d.sync()

    try:
        return [timed(lambda i=i: click(i)) for i in range(reps)]
    finally:
        d.close()


def report(name: str, rects, results, rows: dict[str, list[float]], base: tuple[float, float], base_name: str) -> None:
    sizes = sorted(min(w, h) for _, _, w, h in rects)
    print(f"\n{name}: {len(rects)} targets, smallest side {sizes[0]} px (median {statistics.median(sizes):g}), "
          f"screen {W}x{H}")
    for conv, (hits, worst, space) in results.items():
        model = f"model {int(space.model_w)}x{int(space.model_h)}" if conv == "absolute" else f"0..{space.model_w:g}"
        print(f"  {conv:10s} ({model:16s}) {hits:4d}/{len(rects)} hits   largest round-trip error {worst} px")
    print(f"  latency, ms                    median      p90   ratio (median / {base_name})")
    print(f"  {base_name:30s} {base[0]:8.2f} {base[1]:8.2f}     1.00")
    for what, xs in rows.items():
        m, p = stats(xs)
        print(f"  {what:30s} {m:8.2f} {p:8.2f} {m / base[0]:8.2f}")


def browser_run(args, site: Site, rects, base) -> None:
    from toolpath.sandboxes.browser import BrowserSandbox

    rows: dict[str, list[float]] = {}
    with BrowserSandbox(start_url=site.url + "/") as box:
        settle = box.settle
        results, clicks = hit_test(box, site, rects)
        rows[f"click (settle {settle:g} s)"] = clicks
        rows["screenshot"] = [timed(box.screenshot) for _ in range(args.reps)]
        n = len(box.observe()["elements"])
        rows[f"observe ({n} elements)"] = [timed(box.observe) for _ in range(args.reps)]
        box.goto(site.url + "/latency")
        for k, v in latencies(box, args.reps).items():
            rows[f"{k} (settle {settle:g} s)"] = v
    with BrowserSandbox(start_url=site.url + "/", settle=0) as box:
        box.act("click", {"x": 1, "y": 1})
        rows["click (settle 0)"] = [timed(lambda i=i: box.act("click", {"x": 640 + i % 7, "y": 360}))
                                    for i in range(args.reps)]
        box.goto(site.url + "/latency")
        for k, v in latencies(box, args.reps).items():
            rows[f"{k} (settle 0)"] = v
    report("browser (BrowserSandbox, headless Chromium)", rects, results, rows, base, "raw page.mouse.click")


def desktop_run(args, site: Site, rects, base) -> None:
    try:
        from toolpath.sandboxes.desktop import DesktopSandbox
    except ImportError as err:
        print(f"\ndesktop: skipped, toolpath.sandboxes.desktop is not available ({err})")
        return
    from toolpath.sandboxes.base import SandboxError

    rows: dict[str, list[float]] = {}
    try:
        box = DesktopSandbox(start_url=site.url + "/", screen=f"{W}x{H}x24").start()
    except SandboxError as err:
        print(f"\ndesktop: skipped, the desktop sandbox did not start: {err}")
        return
    with box:
        settle = box.settle
        results, clicks = hit_test(box, site, rects)
        rows[f"click (settle {settle:g} s)"] = clicks
        rows["screenshot"] = [timed(box.screenshot) for _ in range(args.reps)]
        rows["observe (window list)"] = [timed(box.observe) for _ in range(args.reps)]
        try:  # for reference, the rawest click on an X display: XTest events through python-xlib, unsynced
            rows["raw XTest click (no settle)"] = raw_xtest_click(box.display, args.reps)
        except Exception as err:
            print(f"desktop: no raw XTest reference ({type(err).__name__}: {err})")
    with DesktopSandbox(start_url=site.url + "/latency", screen=f"{W}x{H}x24", settle=0) as box:
        rows["click (settle 0)"] = [timed(lambda i=i: box.act("click", {"x": 900 + i % 7, "y": 500}))
                                    for i in range(args.reps)]
        for k, v in latencies(box, args.reps).items():
            rows[f"{k} (settle 0)"] = v
    report("desktop (DesktopSandbox, Xvfb + Chromium window)", rects, results, rows, base, "raw page.mouse.click")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", type=int, default=200)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--desktop", action="store_true", help="also measure the desktop sandbox (Xvfb)")
    args = ap.parse_args()
    from toolpath.sandboxes.browser import chromium_path

    if chromium_path() is None:
        print("no Chromium here (apt-get install chromium, or set $TOOLPATH_CHROMIUM): nothing measured")
        return
    rects = targets(args.targets, args.seed)
    site = Site({"/": targets_page(rects), "/latency": LATENCY_PAGE})
    try:
        base = stats(raw_playwright_click(site.url + "/latency", args.reps))
        browser_run(args, site, rects, base)
        if args.desktop:
            desktop_run(args, site, rects, base)
    finally:
        site.close()


if __name__ == "__main__":
    main()

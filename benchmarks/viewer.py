"""First screen of a 10,000-step run in the viewer, in Chromium, against the same page loading every step at once.

    python benchmarks/viewer.py [--steps 10000] [--repeats 5] [--keep]

A scratch store gets one run of `--steps` steps (policy / tools / observe rounds with tool calls, observations,
raw output and a screenshot every few steps, the sizes real runs record). The figure is the wall time from
`page.goto` until the first step is visible: the viewer as shipped (the first page of 50 inlined, the rest
fetched as the reader scrolls) against the baseline, the same page with `?page_size=N` drawing all N steps
at once. Goal: ≤ 1 s for the first screen. Needs playwright and the system Chromium (the gui extra).
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _screens(store, n=4):
    from PIL import Image, ImageDraw

    refs = []
    for i in range(n):
        im = Image.new("RGB", (640, 400), (240, 240, 240))
        d = ImageDraw.Draw(im)
        d.rectangle((40 + 30 * i, 60, 260 + 30 * i, 120), outline="black", width=2)
        d.text((60 + 30 * i, 80), f"button {i}", fill="black")
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        refs.append(store.put_artifact(buf.getvalue(), f"screen_{i}.png", "image/png").model_dump())
    return refs


def make_run(home: Path, steps: int) -> str:
    from toolpath.runs import open_store

    store = open_store(home)
    screens = _screens(store)
    run_id = store.create_run('{"id": "bench", "instruction": "click through a long form"}', "bench", "bench",
                              "computer_use")
    t = time.time()
    store.put_step(run_id, 0, "task", {"messages": [{"role": "user", "content": "click through a long form"}]}, t, 0)
    for seq in range(1, steps):
        kind = seq % 3
        if kind == 1:
            payload = {"messages": [{"role": "user", "name": "observe",
                                     "content": f"640x400 pixels\nurl: http://x/{seq}",
                                     "images": [screens[seq % len(screens)]]}]}
            node = "observe"
        elif kind == 2:
            text = f"Step {seq}: press the next button, the form has more fields below. " * 3
            payload = {"messages": [{"role": "assistant", "content": text,
                                     "tool_calls": [{"id": f"c{seq}", "name": "click",
                                                     "arguments": {"x": seq % 640, "y": 90}}]}],
                       "raw": f"<operation>{text}</operation>\n<action>\nclick(x={seq % 640}, y=90)\n</action>",
                       "issues": [], "latency": 0.8}
            node = "policy"
        else:
            content = f"clicked ({seq % 640}, 90) on <button> 'Next' [step {seq}]"
            payload = {"messages": [{"role": "tool", "content": content, "tool_call_id": f"c{seq - 1}",
                                     "name": "click"}],
                       "observations": [{"call_id": f"c{seq - 1}", "tool": "click", "content": content,
                                         "error": seq % 97 == 0}]}
            node = "act"
        store.put_step(run_id, seq, node, payload, t + seq, 0.01, 120 if node == "policy" else 0,
                       30 if node == "policy" else 0)
    store.update_run(run_id, status="finished", answer="done", steps=steps)
    store.close()
    return run_id


def first_screen(browser, url: str) -> float:
    """Seconds from navigation until the first step is on screen (a fresh page each time)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        t0 = time.perf_counter()
        page.goto(url, wait_until="commit")
        page.wait_for_selector("#step-0", state="visible", timeout=120_000)
        return time.perf_counter() - t0
    finally:
        page.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the scratch store (its path is printed)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from toolpath.sandboxes.browser import CHROMIUM_ARGS, chromium_path
    from toolpath.viewer import serve

    exe = chromium_path()
    if exe is None:
        sys.exit("no Chromium on PATH (Debian package chromium) and $TOOLPATH_CHROMIUM unset")
    home = Path(tempfile.mkdtemp(prefix="toolpath-viewer-bench-"))
    t = time.perf_counter()
    run_id = make_run(home, args.steps)
    print(f"store {home}: one run of {args.steps} steps written in {time.perf_counter() - t:.1f} s")
    server, url = serve(home, port=0)
    lazy_url, all_url = f"{url}runs/{run_id}", f"{url}runs/{run_id}?page_size={args.steps}"
    sizes = {name: len(urllib.request.urlopen(u).read()) for name, u in (("lazy", lazy_url), ("all", all_url))}
    lazy, full = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        first_screen(browser, lazy_url)  # warm-up: browser process, static files, SQLite page cache
        for _ in range(args.repeats):  # interleaved, so drift in the machine's load hits both alike
            lazy.append(first_screen(browser, lazy_url))
            full.append(first_screen(browser, all_url))
        browser.close()
    server.shutdown()
    server.server_close()
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    ml, mf = statistics.median(lazy), statistics.median(full)
    print(f"{'page':<34}{'HTML':>10}{'first screen (median of ' + str(args.repeats) + ')':>34}")
    print(f"{'viewer (50 steps, rest on scroll)':<34}{sizes['lazy'] / 1e3:>8.0f}kB{ml:>30.3f} s")
    print(f"{'baseline (all steps at once)':<34}{sizes['all'] / 1e6:>8.1f}MB{mf:>30.3f} s")
    print(f"ratio baseline / viewer: {mf / ml:.1f}x; goal first screen <= 1 s: {'met' if ml <= 1.0 else 'NOT met'}")
    print("runs (s): viewer " + " ".join(f"{x:.3f}" for x in lazy) + "; baseline " + " ".join(f"{x:.3f}" for x in full))


if __name__ == "__main__":
    main()

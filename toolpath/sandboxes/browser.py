"""The web GUI sandbox: Playwright's sync API on the system Chromium, one fresh browser per episode.

    BrowserSandbox(limits, start_url=None, allowed_hosts=None, viewport="1280x720", headless=True,
                   navigation_timeout=30, action_timeout=10, setup_js=None, settle=0.05)

Options (a task spec passes them in `sandbox.options`):
  start_url           the page the episode starts on. One that does not answer (connection refused, an HTTP
                      error status, a timeout) is a SandboxError from start() naming the URL and why.
  allowed_hosts       hosts the browser may reach besides start_url's own host and port: names ("example.com",
                      any port), "host:port", "*.example.com" (subdomains), or "*" (everything). Requests to
                      other hosts are aborted and reported (observe()["blocked"], and the action that caused
                      them). data:, about: and blob: URLs are always allowed; file: only when start_url is one.
  viewport            "WxH", [w, h] or {"width", "height"}; default 1280x720. The screen is the viewport at
                      device scale factor 1, so a screenshot pixel is a CSS pixel is a mouse coordinate.
  headless            default True; False needs a display (DISPLAY).
  navigation_timeout  seconds a page load may take (start_url, goto, a click that navigates, back).
  action_timeout      seconds any other browser call may take.
  setup_js            JavaScript run once start_url has loaded (MiniWoB starts its episode with it).
  settle              seconds to wait after each action, so the next screenshot shows its result.

Actions are tools.gui's web set (screen pixels) plus `long_press` and `navigate_back` (browser back), done with
page.mouse / page.keyboard. `swipe` is the movement of a finger on a touch screen, done as a mouse drag: "swipe
up" moves the finger from the start point upwards (on a phone that moves the content up, i.e. scrolls down);
a page that listens to pointer/mouse events sees it as a drag (a mouse drag does not scroll a desktop page: use
scroll for that). Popups and new tabs are followed: the newest page is the one actions and screenshots use.
Dialogs (alert, confirm, prompt) are accepted and their message is reported with the action.

`act(action, args, deadline=None)`: with a deadline (time.monotonic(), toolpath/deadline.py) the action ends by
it: a wait or a long press is cut short, typing stops (in slices of TYPE_SLICE characters), and the wait for a
page that an action started loading gives up; the account says what was cut.

Playwright's sync objects belong to the thread that made them, and toolpath calls sandboxes from several
threads (tool calls with a timeout run in a pool; graph nodes elsewhere). So the sandbox owns one worker thread
that makes every Playwright call, and each public method hands its work to it and waits.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from ..deadline import BUDGET_SPENT, clamp, passed
from .base import SandboxError, SandboxLimits
from .browser_options import BrowserOptions, read_seconds, read_setup_js, read_start_url, read_viewport
from .leftovers import kill_tree
from .screen import KEY_EXAMPLES, TYPE_SLICE, ScreenSandbox
from .web_access import AllowList, allowed_hosts_option

__all__ = ["BrowserSandbox", "chromium_path", "CHROMIUM_ENV", "KEYS", "OBSERVE_JS"]

CHROMIUM_ENV = "TOOLPATH_CHROMIUM"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
NOTCH_PX = 100  # one wheel notch, as Chromium scrolls for a real mouse wheel
DRAG_STEPS = 12  # intermediate mouse moves of a drag, so pages see the motion between press and release
MARGIN_S = 30.0  # how much longer than its own timeouts a call may take before the sandbox gives up on it

# pyautogui's key names (what ScaleCUA's models write) and common aliases → Playwright's key names.
KEYS = {
    "enter": "Enter", "return": "Enter", "ret": "Enter", "tab": "Tab", "space": " ", "spacebar": " ",
    "backspace": "Backspace", "bksp": "Backspace", "delete": "Delete", "del": "Delete", "insert": "Insert",
    "ins": "Insert", "esc": "Escape", "escape": "Escape",
    "ctrl": "Control", "control": "Control", "ctrlleft": "Control", "ctrlright": "Control", "ctl": "Control",
    "shift": "Shift", "shiftleft": "Shift", "shiftright": "Shift",
    "alt": "Alt", "altleft": "Alt", "altright": "Alt", "option": "Alt", "optionleft": "Alt", "optionright": "Alt",
    "win": "Meta", "winleft": "Meta", "winright": "Meta", "cmd": "Meta", "command": "Meta", "super": "Meta",
    "meta": "Meta", "windows": "Meta",
    "up": "ArrowUp", "down": "ArrowDown", "left": "ArrowLeft", "right": "ArrowRight", "arrowup": "ArrowUp",
    "arrowdown": "ArrowDown", "arrowleft": "ArrowLeft", "arrowright": "ArrowRight",
    "pageup": "PageUp", "pgup": "PageUp", "page_up": "PageUp", "pagedown": "PageDown", "pgdn": "PageDown",
    "page_down": "PageDown", "home": "Home", "end": "End", "capslock": "CapsLock", "numlock": "NumLock",
    "scrolllock": "ScrollLock", "printscreen": "PrintScreen", "prtsc": "PrintScreen", "pause": "Pause",
    "contextmenu": "ContextMenu", "apps": "ContextMenu", "plus": "+", "minus": "-",
    **{f"f{i}": f"F{i}" for i in range(1, 25)},
}

def _script(name: str) -> str:
    """A JavaScript function kept beside this module (package data), as Playwright's evaluate takes it."""
    return (Path(__file__).with_name(name)).read_text(encoding="utf-8").strip()


# What is under a point, for the account of an action: the nearest interactive ancestor, else the element.
DESCRIBE_JS = _script("browser_describe.js")
# observe()'s element list, which the DOM baseline reads. One pass over the DOM; cheap
# tests first, layout (rects, visibility) only for candidates.
OBSERVE_JS = _script("browser_observe.js")

# The next animation frame (or 100 ms, whichever is first): a wheel's scroll is applied by then.
FRAME_JS = """() => new Promise((done) => { setTimeout(done, 100); requestAnimationFrame(done); })"""


def chromium_path() -> str | None:
    """The Chromium to drive: $TOOLPATH_CHROMIUM, else `chromium` / `chromium-browser` on PATH; None if none."""
    env = os.environ.get(CHROMIUM_ENV)
    if env:
        return env
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "message", None) or err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class BrowserSandbox(ScreenSandbox):
    """A Chromium page an agent sees and acts on (the GUISandbox protocol, sandboxes/screen.py); the actions
    themselves are ScreenSandbox's, done with the primitives below."""

    platform = "web"
    KIND, THIS_IS, INSTEAD = "browser", "a web browser", "use click, navigate_back or goto a page instead"
    Options = BrowserOptions

    def __init__(self, limits: SandboxLimits | None = None, start_url: str | None = None, allowed_hosts=None,
                 viewport=None, headless: bool = True, navigation_timeout: float | None = None,
                 action_timeout: float | None = None, setup_js: str | None = None, settle: float | None = None):
        self.limits = limits or SandboxLimits()
        self.start_url = read_start_url(start_url)
        self.allowed_hosts = allowed_hosts_option(allowed_hosts)
        self.width, self.height = read_viewport(viewport)
        self.headless = bool(headless)
        self.navigation_timeout = read_seconds("navigation_timeout", navigation_timeout, 30.0)
        self.action_timeout = read_seconds("action_timeout", action_timeout, 10.0)
        self.settle = read_seconds("settle", settle, 0.05)
        self.setup_js = read_setup_js(setup_js)
        self._access = AllowList(start_url, self.allowed_hosts)
        self._pool: ThreadPoolExecutor | None = None
        self._worker: int | None = None  # ident of the worker thread
        self._pw = self._browser = self._context = self._page = None
        self._driver_pid: int | None = None
        self._blocked: list[str] = []  # since the last observe()
        self._events: list[str] = []  # not yet told in an action's result: blocked requests, dialogs, pages
        self._pointer = (0, 0)  # Playwright's mouse starts at the top left corner
        self._nav_seen = self._nav_done = False
        self._deadline: float | None = None  # of the action the worker is doing (act's argument)
        self._before_url = ""  # the page an action started on
        self._offered: list[str] = []  # files a page's file chooser gets (offer_files)

    # ----------------------------------------------------------------- the worker thread

    def _call(self, fn, *args, timeout: float | None = None):
        """Run fn(*args) on the sandbox's Playwright thread and return its result (or raise its error)."""
        if self._worker == threading.get_ident():
            return fn(*args)
        if self._pool is None:
            raise SandboxError("the browser sandbox is not running (start() it, or open a new one)")
        limit = (timeout or 0) + self.navigation_timeout + self.action_timeout + MARGIN_S
        future = self._pool.submit(fn, *args)
        try:
            return future.result(timeout=limit)
        except FutureTimeout:
            raise SandboxError(f"the browser did not answer within {limit:g} s") from None

    def _playwright_errors(self):
        from playwright.sync_api import Error

        return Error

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> BrowserSandbox:
        if self._pool is not None:
            return self
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            raise SandboxError("the browser sandbox needs the playwright package (pip install playwright); "
                               "it drives the system Chromium, so `playwright install` is not needed") from None
        exe = chromium_path()
        if exe is None:
            raise SandboxError(f"no Chromium found: install Debian's chromium (apt-get install chromium) or set "
                               f"${CHROMIUM_ENV} to a Chromium binary")
        if not os.path.exists(exe):
            raise SandboxError(f"${CHROMIUM_ENV} points at {exe}, which does not exist")
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="browser-sandbox")
        self._worker = self._pool.submit(threading.get_ident).result()
        try:
            self._call(self._start, exe)
        except BaseException:
            self.close()
            raise
        return self

    def _start(self, exe: str) -> None:
        from playwright.sync_api import Error, sync_playwright

        self._pw = sync_playwright().start()
        try:  # the driver's pid, so close() can kill it (and its Chromium) if Playwright itself is stuck
            self._driver_pid = self._pw._impl_obj._connection._transport._proc.pid
        except AttributeError:
            self._driver_pid = None
        try:
            self._browser = self._pw.chromium.launch(executable_path=exe, headless=self.headless, args=CHROMIUM_ARGS,
                                                     timeout=max(self.navigation_timeout, 10.0) * 1000)
        except Error as err:
            raise SandboxError(f"cannot launch Chromium ({exe}): {_first_line(err)}") from None
        # A fresh context per episode: no cookies, storage or cache shared with any other sandbox.
        self._context = self._browser.new_context(viewport={"width": self.width, "height": self.height},
                                                  device_scale_factor=1, service_workers="block")
        self._context.set_default_timeout(self.action_timeout * 1000)
        self._context.set_default_navigation_timeout(self.navigation_timeout * 1000)
        if "*" not in self.allowed_hosts:
            self._context.route("**/*", self._route)
        self._context.on("page", self._adopt)
        self._adopt(self._context.new_page())
        if self.start_url:
            self._load(self.start_url, "start_url", "load")
        if self.setup_js:
            try:
                self._page.evaluate(self.setup_js)
            except Error as err:
                raise SandboxError(f"setup_js failed on {self.start_url}: {_first_line(err)}") from None
            self._after()

    def _load(self, url: str, what: str, wait_until: str) -> None:
        """Load `url` in the active page; no answer, a timeout or an HTTP error status is a SandboxError."""
        from playwright.sync_api import Error
        from playwright.sync_api import TimeoutError as PwTimeout

        try:
            resp = self._active().goto(url, wait_until=wait_until)
        except PwTimeout:
            raise SandboxError(f"{what} {url} did not load within {self.navigation_timeout:g} s") from None
        except Error as err:
            raise SandboxError(f"{what} {url} did not load: {_net_reason(err)}") from None
        if resp is not None and resp.status >= 400:
            raise SandboxError(f"{what} {url} answered HTTP {resp.status} {resp.status_text}".rstrip())

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            pool.submit(self._close).result(timeout=15)
        except BaseException:  # stuck or broken: kill the driver and every browser process under it
            if self._driver_pid:
                kill_tree(self._driver_pid)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            self._worker = None
            self._pw = self._browser = self._context = self._page = None

    def _close(self) -> None:
        for step in (lambda: self._context and self._context.close(), lambda: self._browser and self._browser.close(),
                     lambda: self._pw and self._pw.stop()):
            try:
                step()
            except Exception:
                pass
        if self._driver_pid:  # whatever outlived a graceful close
            kill_tree(self._driver_pid)

    def __enter__(self) -> BrowserSandbox:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # a sandbox dropped without close() still takes its browser with it
        try:
            if self._pool is not None and self._driver_pid:
                kill_tree(self._driver_pid)
        except Exception:
            pass

    # ----------------------------------------------------------------- pages, allow-list, events (worker thread)

    def allowed(self, url: str) -> bool:
        """May the browser load `url`? The allow-list's answer (no thread needed)."""
        return self._access.allows(url)

    def _route(self, route, request) -> None:
        url = request.url
        if self.allowed(url):
            route.fallback()
            return
        self._blocked.append(url)
        self._events.append(f"blocked a request to {url[:120]} (not in the allow-list)")
        route.abort("blockedbyclient")

    def _adopt(self, page) -> None:
        """Make `page` (the first one, a popup, a new tab) the active page and listen to it."""
        if self._page is not None:
            self._events.append(f"a new page opened ({page.url or 'about:blank'}); it is now the active page")
        self._page = page

        def on_request(req):
            if page is self._page and req.is_navigation_request() and req.frame == page.main_frame:
                self._nav_seen = True

        def on_done(frame_or_req):
            if page is self._page:
                self._nav_done = True

        def on_dialog(dialog):
            self._events.append(f"a {dialog.type} said {dialog.message[:200]!r} (accepted)")
            try:
                dialog.accept()
            except Exception:
                pass

        def on_close(_page):
            if page is self._page:
                pages = [p for p in self._context.pages if not p.is_closed()] if self._context else []
                self._page = pages[-1] if pages else None
                self._events.append("the page closed" + (f"; back on {self._page.url}" if self._page else ""))

        page.on("request", on_request)
        page.on("framenavigated", lambda f: f == page.main_frame and on_done(f))
        page.on("requestfailed", lambda r: r.is_navigation_request() and on_done(r))
        def on_file_chooser(chooser):  # listening suppresses the native dialog: the offered files, or none
            files = self._offered if chooser.is_multiple() else self._offered[:1]
            if not files:
                self._events.append("a file chooser opened; this task offered no files, so none was chosen")
                return
            try:
                chooser.set_files(files)
                self._events.append("a file chooser opened; chose " + ", ".join(Path(f).name for f in files))
            except Exception as err:  # noqa: BLE001 — the page's input refused them: the agent hears why
                self._events.append(f"a file chooser opened; choosing the files failed: {_first_line(err)}")

        page.on("dialog", on_dialog)
        page.on("close", on_close)
        page.on("filechooser", on_file_chooser)

    def offer_files(self, paths: list[str]) -> None:
        """The files a file chooser the page opens gets (an upload field clicked), as a user would pick them."""
        self._offered = [str(p) for p in paths]

    def _active(self):
        if self._page is None or self._page.is_closed():
            pages = [p for p in self._context.pages if not p.is_closed()] if self._context else []
            if not pages:
                raise SandboxError("the browser has no open page")
            self._page = pages[-1]
        return self._page

    def _after(self) -> None:
        """Let what an action started finish: a navigation (bounded by navigation_timeout), then `settle`."""
        from playwright.sync_api import Error

        page = self._active()
        if self.settle:
            page.wait_for_timeout(clamp(self.settle, self._deadline) * 1000)  # also delivers the page's events
        page = self._active()  # a popup may have opened meanwhile
        limit = clamp(self.navigation_timeout, self._deadline)
        try:
            # Playwright reads a timeout of 0 as "no timeout": a spent budget waits a millisecond instead.
            if self._nav_seen and not self._nav_done:
                page.wait_for_event("framenavigated", timeout=max(1.0, limit * 1000))
            page.wait_for_load_state("domcontentloaded", timeout=max(1.0, limit * 1000))
        except Error:
            why = f" ({BUDGET_SPENT})" if limit < self.navigation_timeout else ""
            self._events.append(f"the page is still loading after {limit:.3g} s{why}")
        self._nav_seen = self._nav_done = False

    # ----------------------------------------------------------------- the protocol

    def screen_size(self) -> tuple[int, int]:
        return self.width, self.height

    def screenshot(self) -> bytes:
        return self._call(self._guard, "screenshot", lambda: self._active().screenshot(type="png"))

    @property
    def url(self) -> str:
        return self._call(lambda: self._active().url)

    def html(self) -> str:
        return self._call(self._guard, "html", lambda: self._active().content())

    def observe(self) -> dict:
        def run():
            page = self._active()
            elements = page.evaluate(OBSERVE_JS)
            blocked, self._blocked = self._blocked, []
            return {"url": page.url, "title": page.title(), "elements": elements, "blocked": blocked}

        return self._call(self._guard, "observe", run)

    def evaluate(self, js: str):
        """The JSON value of a JavaScript expression (or of calling it, if it is a function) in the active page."""
        if not isinstance(js, str) or not js.strip():
            raise SandboxError(f"evaluate: expected a JavaScript expression, got {js!r}")

        def run():
            value = self._active().evaluate(js)
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                value = repr(value)
            return value

        return self._call(self._guard, "evaluate", run)

    def goto(self, url: str) -> str:
        """Load `url` in the active page (allow-list checked); returns the URL the browser ended on."""
        if not isinstance(url, str) or not url:
            raise SandboxError(f"goto: expected a URL, got {url!r}")
        if not self.allowed(url):
            raise SandboxError(f"goto: {url} is not in the allow-list ({self._access.text()})")

        def run():
            self._load(url, "goto:", "domcontentloaded")
            return self._active().url

        return self._call(self._guard, "goto", run)

    def _guard(self, what: str, fn):
        """fn() with Playwright's errors (a closed browser, a timeout, a JS exception) as SandboxErrors."""
        try:
            return fn()
        except SandboxError:
            raise
        except self._playwright_errors() as err:
            raise SandboxError(f"{what}: {_first_line(err)}") from None

    def _run(self, action: str, args: dict, deadline: float | None) -> str:
        try:  # the time a wait or a long press takes on top of the usual bound
            extra = sum(float(args.get(k) or 0) for k in ("seconds", "duration"))
        except (TypeError, ValueError):
            raise SandboxError(f"{action}: seconds/duration must be numbers, got {args!r}") from None
        return self._call(self._perform, action, args, deadline, timeout=extra)

    # ----------------------------------------------------------------- ScreenSandbox's hooks (worker thread)

    def _before_action(self) -> None:  # events not yet told (one that came after the last account) are kept
        self._nav_seen = self._nav_done = False
        self._before_url = self._active().url

    def _settle(self, action: str) -> None:
        self._after()

    def _account(self, text: str) -> str:
        page = self._active()
        notes, self._events = list(self._events), []
        if page.url != self._before_url and not any(n.startswith("a new page") for n in notes):
            notes.append(f"the page is now {page.url[:200]}")
        return "; ".join([text, *notes])

    def _backend_errors(self):
        return self._playwright_errors()

    def _failure(self, err: BaseException) -> str:
        return f"the browser failed: {_first_line(err)}"

    # ----------------------------------------------------------------- primitives (worker thread)

    def _pointer_at(self) -> tuple[int, int]:
        return self._pointer

    def _describe(self, x: int, y: int) -> str:
        try:
            desc = self._active().evaluate(DESCRIBE_JS, [x, y])
        except self._playwright_errors():
            return ""
        return f" on {desc}" if desc else ""

    def _move(self, x: int, y: int, steps: int = 1) -> None:
        self._active().mouse.move(x, y, steps=steps)
        self._pointer = (x, y)

    def _click(self, x: int, y: int, clicks: int, button: str) -> str:
        what = self._describe(x, y)  # before the click: it may navigate away
        self._pointer = (x, y)  # mouse.click moves there first
        mouse = self._active().mouse
        if clicks == 2:
            mouse.dblclick(x, y, button=button)
        else:
            mouse.click(x, y, button=button, click_count=clicks)
        return what

    def _drag(self, start: tuple[int, int], end: tuple[int, int], button: str = "left") -> None:
        self._move(*start)
        self._active().mouse.down(button=button)
        self._move(*end, steps=DRAG_STEPS)
        self._active().mouse.up(button=button)

    def _press_down(self, x: int, y: int) -> str:
        what = self._describe(x, y)
        self._move(x, y)
        self._active().mouse.down()
        return what

    def _mouse_up(self) -> None:
        self._active().mouse.up()

    def _wheel(self, x: int, y: int, clicks: int) -> str:
        page = self._active()
        before = page.evaluate("[scrollX, scrollY]")
        page.mouse.wheel(0, -clicks * NOTCH_PX)  # pyautogui's sign: positive scrolls up (content comes down)
        page.evaluate(FRAME_JS)  # wheel() does not wait for the scroll to happen
        after = page.evaluate("[scrollX, scrollY]")
        return "" if after != before else " (the page did not move: at its end, or nothing scrolls there)"

    def _key_name(self, action: str, key: str, k: str) -> str:
        if len(key) == 1:
            # Letters and digits by their key code, so a held Shift makes 'b' a 'B' (as on a real keyboard).
            if "a" <= key <= "z":
                return "Key" + key.upper()
            return "Digit" + key if key.isdigit() else key
        if k in KEYS:
            return KEYS[k]
        raise SandboxError(f"{action}: unknown key {key!r}; keys are names such as {KEY_EXAMPLES} (pyautogui's "
                           "names) or single characters; type text with write")

    def _press_key(self, name: str) -> None:
        self._active().keyboard.press(name)

    def _chord(self, names: list[str]) -> None:
        keyboard = self._active().keyboard
        for k in names:
            keyboard.down(k)
        for k in reversed(names):
            keyboard.up(k)

    def _key_down(self, name: str) -> None:
        self._active().keyboard.down(name)

    def _key_up(self, name: str) -> None:
        self._active().keyboard.up(name)

    def _type(self, message: str) -> int:
        typed = 0
        while typed < len(message) and not passed(self._deadline):
            self._active().keyboard.type(message[typed:typed + TYPE_SLICE])
            typed += TYPE_SLICE
        return typed

    def _pause(self, seconds: float) -> None:
        self._active().wait_for_timeout(seconds * 1000)  # not time.sleep: the page's events keep coming

    def _do_navigate_back(self, action, args):
        from playwright.sync_api import TimeoutError as PwTimeout

        page = self._active()
        before = page.url
        try:
            resp = page.go_back(wait_until="domcontentloaded")
        except PwTimeout:
            return f"went back; the page is still loading after {self.navigation_timeout:g} s"
        # None: no history entry, or a same-document back (a #hash, pushState), which loads nothing
        if resp is None and page.url == before:
            raise SandboxError(f"{action}: there is no earlier page to go back to (at {before[:200]})")
        return "went back"


def _net_reason(err: BaseException) -> str:
    """Playwright's 'net::ERR_CONNECTION_REFUSED at URL' as 'connection refused (net::ERR_CONNECTION_REFUSED)'."""
    line = _first_line(err)
    for code in ("ERR_CONNECTION_REFUSED", "ERR_NAME_NOT_RESOLVED", "ERR_CONNECTION_RESET", "ERR_TIMED_OUT",
                 "ERR_ADDRESS_UNREACHABLE", "ERR_BLOCKED_BY_CLIENT", "ERR_EMPTY_RESPONSE", "ERR_FILE_NOT_FOUND",
                 "ERR_CONNECTION_CLOSED", "ERR_INVALID_URL"):
        if code in line:
            words = code[4:].lower().replace("_", " ")
            if code == "ERR_BLOCKED_BY_CLIENT":
                words = "blocked by the allow-list"
            return f"{words} (net::{code})"
    return line

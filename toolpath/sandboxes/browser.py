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
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..deadline import BUDGET_SPENT, clamp, cut_seconds, cut_typing, passed
from ..spec import host_allowed
from .base import KEY_EXAMPLES, SandboxError, SandboxLimits, check_screen_action

__all__ = ["BrowserSandbox", "chromium_path", "CHROMIUM_ENV", "KEYS", "OBSERVE_JS"]

CHROMIUM_ENV = "TOOLPATH_CHROMIUM"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
ALWAYS_ALLOWED = ("data", "about", "blob")
NOTCH_PX = 100  # one wheel notch, as Chromium scrolls for a real mouse wheel
DRAG_STEPS = 12  # intermediate mouse moves of a drag, so pages see the motion between press and release
MARGIN_S = 30.0  # how much longer than its own timeouts a call may take before the sandbox gives up on it
TYPE_SLICE = 50  # characters typed between two looks at the deadline

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

# What is under a point, for the account of an action: the nearest interactive ancestor, else the element.
DESCRIBE_JS = """([x, y]) => {
  let el = document.elementFromPoint(x, y);
  if (!el) return "";
  const hit = el.closest('a,button,input,textarea,select,label,summary,[role],[onclick]') || el;
  if (hit === document.documentElement || hit === document.body) return "";  // nothing in particular
  const text = (hit.getAttribute('aria-label') || hit.innerText || hit.value || hit.getAttribute('placeholder')
                || hit.getAttribute('title') || hit.getAttribute('alt') || '').replace(/\\s+/g, ' ').trim();
  const tag = hit.tagName.toLowerCase() + (hit.type && hit.tagName === 'INPUT' ? '[' + hit.type + ']' : '');
  return '<' + tag + '>' + (text ? " '" + (text.length > 40 ? text.slice(0, 37) + "...'" : text + "'") : '');
}"""

# observe()'s element list (the contract in /work/shared: the DOM policy reads it). One pass over the DOM;
# cheap tests first, layout (rects, visibility) only for candidates.
OBSERVE_JS = r"""() => {
  const W = window.innerWidth, H = window.innerHeight;
  const TAGS = new Set(['A', 'BUTTON', 'INPUT', 'TEXTAREA', 'SELECT', 'LABEL']);
  const ROLES = new Set(['button', 'link', 'tab', 'checkbox', 'radio', 'menuitem', 'option', 'treeitem']);
  const LEAVES = new Set(['SPAN', 'DIV', 'TD', 'TH', 'LI', 'P', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'B', 'STRONG',
                          'EM', 'I', 'SMALL', 'DT', 'DD', 'CAPTION', 'LEGEND', 'PRE', 'CODE', 'FONT', 'CENTER']);
  const CONTROL = 'a,button,input,textarea,select,label,[role=button],[role=link],[role=tab],[role=checkbox],' +
                  '[role=radio],[role=menuitem],[role=option],[role=treeitem],[onclick]';
  const squash = (s) => (s || '').replace(/\s+/g, ' ').trim().slice(0, 200);
  const active = document.activeElement;
  const out = [];
  for (const el of document.body ? document.body.querySelectorAll('*') : []) {
    const tag = el.tagName;
    const role = (el.getAttribute('role') || '').toLowerCase();
    let kind = null, own = '';
    if (TAGS.has(tag) || ROLES.has(role) || el.hasAttribute('onclick') || typeof el.onclick === 'function') {
      if (tag === 'INPUT' && el.type === 'hidden') continue;
      kind = 'control';
    } else if (LEAVES.has(tag)) {
      for (const n of el.childNodes) if (n.nodeType === 3) own += n.nodeValue;
      own = squash(own);
      // a text leaf inside a control is part of that control's text already
      if (own && !(el.parentElement && el.parentElement.closest(CONTROL))) kind = 'text';
    }
    if (!kind) continue;
    const r = el.getBoundingClientRect();
    const x1 = Math.max(0, Math.floor(r.left)), y1 = Math.max(0, Math.floor(r.top));
    const x2 = Math.min(W, Math.ceil(r.right)), y2 = Math.min(H, Math.ceil(r.bottom));
    if (x2 <= x1 || y2 <= y1) continue;  // empty, or outside the viewport
    if (el.checkVisibility ? !el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})
                           : getComputedStyle(el).visibility === 'hidden') continue;
    const e = {id: out.length, tag: tag.toLowerCase(), role: role, text: '', box: [x1, y1, x2, y2]};
    if (kind === 'text') e.text = own;
    else if (tag === 'SELECT') {
      e.options = Array.from(el.options, (o) => squash(o.text));
      const s = el.options[el.selectedIndex];
      e.selected = s ? squash(s.text) : '';
      e.text = e.selected;
    } else if (tag === 'INPUT' && ['submit', 'button', 'reset'].includes(el.type)) e.text = squash(el.value);
    else if (tag !== 'INPUT' && tag !== 'TEXTAREA') e.text = squash(el.innerText || el.getAttribute('aria-label'));
    if (tag === 'INPUT') e.type = el.type;
    if (el.hasAttribute('name')) e.name = el.getAttribute('name');
    if (tag === 'INPUT' || tag === 'TEXTAREA') {
      if (!['checkbox', 'radio', 'submit', 'button', 'reset', 'file'].includes(el.type))
        e.value = el.type === 'password' ? '*'.repeat(el.value.length) : el.value;
      else if ((el.type === 'checkbox' || el.type === 'radio') && el.hasAttribute('value')) e.value = el.value;
      if (el.placeholder) e.placeholder = el.placeholder;
    }
    if (tag === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) e.checked = el.checked;
    else if (role === 'checkbox' || role === 'radio') e.checked = el.getAttribute('aria-checked') === 'true';
    if (tag === 'A' && el.hasAttribute('href')) e.href = el.href;
    if (el.labels && el.labels.length) e.label = squash(el.labels[0].innerText);
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') e.disabled = true;
    if (el === active) e.focused = true;
    out.push(e);
  }
  return out;
}"""

# The next animation frame (or 100 ms, whichever is first): a wheel's scroll is applied by then.
FRAME_JS = """() => new Promise((done) => { setTimeout(done, 100); requestAnimationFrame(done); })"""


def chromium_path() -> str | None:
    """The Chromium to drive: $TOOLPATH_CHROMIUM, else `chromium` / `chromium-browser` on PATH; None if none."""
    env = os.environ.get(CHROMIUM_ENV)
    if env:
        return env
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _viewport(value) -> tuple[int, int]:
    if value is None:
        return 1280, 720
    try:
        if isinstance(value, str):
            w, h = value.lower().split("x")
        elif isinstance(value, dict):
            w, h = value["width"], value["height"]
        else:
            w, h = value
        w, h = int(w), int(h)
    except (ValueError, TypeError, KeyError):
        raise SandboxError(f"viewport: expected 'WxH', [w, h] or {{'width', 'height'}}, got {value!r}") from None
    if not (100 <= w <= 8192 and 100 <= h <= 8192):
        raise SandboxError(f"viewport: {w}x{h} is out of range (100..8192 pixels a side)")
    return w, h


def _seconds(name: str, value, default: float) -> float:
    if value is None:
        return default
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise SandboxError(f"{name}: expected seconds, got {value!r}") from None
    if not v >= 0:
        raise SandboxError(f"{name}: expected seconds >= 0, got {value!r}")
    return v


def _endpoint(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the port made explicit for http(s)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _file_path(url: str) -> Path:
    """The file a file:// URL names, symlinks and '..' resolved (so a link out of the folder is seen as out)."""
    return Path(unquote(urlsplit(url).path)).resolve()


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "message", None) or err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _kill_tree(pid: int) -> None:
    """SIGKILL `pid` and all its descendants (Playwright's driver and the Chromium it launched)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(children.get(p, []))
    for p in seen:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


class BrowserSandbox:
    """A Chromium page an agent sees and acts on (the GUISandbox protocol, sandboxes/base.py)."""

    platform = "web"
    OPTIONS = ("start_url", "allowed_hosts", "viewport", "headless", "navigation_timeout", "action_timeout",
               "setup_js", "settle")

    def __init__(self, limits: SandboxLimits | None = None, start_url: str | None = None, allowed_hosts=None,
                 viewport=None, headless: bool = True, navigation_timeout: float | None = None,
                 action_timeout: float | None = None, setup_js: str | None = None, settle: float | None = None):
        self.limits = limits or SandboxLimits()
        if start_url is not None and (not isinstance(start_url, str) or
                                      urlsplit(start_url).scheme not in ("http", "https", "file", "data", "about")):
            raise SandboxError(f"start_url: expected an http(s), file, data or about URL, got {start_url!r}")
        self.start_url = start_url
        if isinstance(allowed_hosts, str):
            allowed_hosts = [h for h in allowed_hosts.replace(",", " ").split() if h]
        if allowed_hosts is not None and not (isinstance(allowed_hosts, (list, tuple))
                                              and all(isinstance(h, str) and h.strip() for h in allowed_hosts)):
            raise SandboxError(f"allowed_hosts: expected a list of host names, got {allowed_hosts!r}")
        self.allowed_hosts = [h.strip().lower() for h in allowed_hosts or []]
        self.width, self.height = _viewport(viewport)
        self.headless = bool(headless)
        self.navigation_timeout = _seconds("navigation_timeout", navigation_timeout, 30.0)
        self.action_timeout = _seconds("action_timeout", action_timeout, 10.0)
        self.settle = _seconds("settle", settle, 0.05)
        if setup_js is not None and not isinstance(setup_js, str):
            raise SandboxError(f"setup_js: expected a JavaScript snippet (a string), got {type(setup_js).__name__}")
        self.setup_js = setup_js
        # Hosts from start_url: exactly its host and port (another server on 127.0.0.1 is another site).
        self._origins: list[tuple[str, int | None]] = []
        # A local start page may load the files beside it (its CSS, scripts, the next page), nothing above them:
        # a model's goto('file:///etc/passwd') is a request like any other.
        self._file_root: Path | None = None
        if start_url:
            scheme, host, port = _endpoint(start_url)
            if scheme == "file":
                self._file_root = _file_path(start_url).parent
            elif host:
                self._origins.append((host, port))
        self._pool: ThreadPoolExecutor | None = None
        self._worker: int | None = None  # ident of the worker thread
        self._pw = self._browser = self._context = self._page = None
        self._driver_pid: int | None = None
        self._blocked: list[str] = []  # since the last observe()
        self._events: list[str] = []  # since the last action: blocked requests, dialogs, new pages
        self._pointer = (0, 0)  # Playwright's mouse starts at the top left corner
        self._nav_seen = self._nav_done = False
        self._deadline: float | None = None  # of the action the worker is doing (act's argument)

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

    def start(self) -> "BrowserSandbox":
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
                _kill_tree(self._driver_pid)
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
            _kill_tree(self._driver_pid)

    def __enter__(self) -> "BrowserSandbox":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # a sandbox dropped without close() still takes its browser with it
        try:
            if self._pool is not None and self._driver_pid:
                _kill_tree(self._driver_pid)
        except Exception:
            pass

    # ----------------------------------------------------------------- pages, allow-list, events (worker thread)

    def allowed(self, url: str) -> bool:
        """May the browser load `url`? The allow-list's answer (no thread needed)."""
        scheme, host, port = _endpoint(url)
        if scheme in ALWAYS_ALLOWED or "*" in self.allowed_hosts:
            return True
        if scheme == "file":
            if "file://" in self.allowed_hosts:
                return True
            return self._file_root is not None and _file_path(url).is_relative_to(self._file_root)
        if (host, port) in self._origins:
            return True
        return host_allowed(host, port, self.allowed_hosts)

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
        page.on("dialog", on_dialog)
        page.on("close", on_close)

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
            raise SandboxError(f"goto: {url} is not in the allow-list ({self._allow_text()})")

        def run():
            self._load(url, "goto:", "domcontentloaded")
            return self._active().url

        return self._call(self._guard, "goto", run)

    def _allow_text(self) -> str:
        hosts = [f"{h}:{p}" if p else h for h, p in self._origins] + self.allowed_hosts
        return "allowed: " + (", ".join(hosts) if hosts else "nothing but data:/about:/blob:")

    def _guard(self, what: str, fn):
        """fn() with Playwright's errors (a closed browser, a timeout, a JS exception) as SandboxErrors."""
        try:
            return fn()
        except SandboxError:
            raise
        except self._playwright_errors() as err:
            raise SandboxError(f"{what}: {_first_line(err)}") from None

    def act(self, action: str, args: dict, deadline: float | None = None) -> str:
        check_screen_action(action, "browser", "a web browser", "use click, navigate_back or goto a page instead")
        args = dict(args or {})
        try:  # the time a wait or a long press takes on top of the usual bound
            extra = sum(float(args.get(k) or 0) for k in ("seconds", "duration"))
        except (TypeError, ValueError):
            raise SandboxError(f"{action}: seconds/duration must be numbers, got {args!r}") from None
        return self._call(self._act, action, args, deadline, timeout=extra)

    def _act(self, action: str, args: dict, deadline: float | None = None) -> str:
        self._deadline = deadline
        try:
            return self._act_now(action, args)
        finally:
            self._deadline = None

    def _act_now(self, action: str, args: dict) -> str:
        from playwright.sync_api import Error

        self._events = []
        self._nav_seen = self._nav_done = False
        page = self._active()
        before = page.url
        try:
            text = getattr(self, "_do_" + action)(page, action, args)
            self._after()
        except SandboxError:
            raise
        except (TypeError, ValueError, KeyError) as err:
            raise SandboxError(f"{action}: bad arguments {args!r}: {err}") from None
        except Error as err:
            raise SandboxError(f"{action}: the browser failed: {_first_line(err)}") from None
        page = self._active()
        notes = list(self._events)
        if page.url != before and not any(n.startswith("a new page") for n in notes):
            notes.append(f"the page is now {page.url[:200]}")
        return "; ".join([text, *notes])

    # ----------------------------------------------------------------- actions (worker thread)

    def _point(self, action: str, x, y) -> tuple[int, int]:
        """(x, y) as integer screen pixels; a missing coordinate is the pointer's; off screen is an error."""
        x = self._pointer[0] if x is None else x
        y = self._pointer[1] if y is None else y
        try:
            ix, iy = int(round(float(x))), int(round(float(y)))
        except (TypeError, ValueError, OverflowError):
            raise SandboxError(f"{action}: coordinates must be numbers, got ({x!r}, {y!r})") from None
        if not (0 <= ix < self.width and 0 <= iy < self.height):
            raise SandboxError(f"{action}: point ({ix}, {iy}) is off the screen, which spans x 0..{self.width - 1} "
                               f"and y 0..{self.height - 1}")
        return ix, iy

    def _what(self, page, x: int, y: int) -> str:
        try:
            desc = page.evaluate(DESCRIBE_JS, [x, y])
        except self._playwright_errors():
            return ""
        return f" on {desc}" if desc else ""

    def _move(self, page, x: int, y: int, steps: int = 1) -> None:
        page.mouse.move(x, y, steps=steps)
        self._pointer = (x, y)

    def _press_at(self, page, action, args, clicks: int, button: str) -> str:
        x, y = self._point(action, args.get("x"), args.get("y"))
        what = self._what(page, x, y)  # before the click: it may navigate away
        self._pointer = (x, y)  # mouse.click moves there first
        if clicks == 2:
            page.mouse.dblclick(x, y, button=button)
        else:
            page.mouse.click(x, y, button=button, click_count=clicks)
        verb = {1: "clicked", 2: "double-clicked", 3: "triple-clicked"}.get(clicks, f"clicked {clicks}x")
        return f"{verb if button == 'left' else button + '-' + verb} ({x}, {y}){what}"

    def _do_click(self, page, action, args):
        return self._press_at(page, action, args, int(args.get("clicks", 1)), args.get("button", "left"))

    def _do_doubleClick(self, page, action, args):
        return self._press_at(page, action, args, 2, args.get("button", "left"))

    def _do_rightClick(self, page, action, args):
        return self._press_at(page, action, args, 1, "right")

    def _do_moveTo(self, page, action, args):
        x, y = self._point(action, args["x"], args["y"])
        self._move(page, x, y)
        return f"moved the pointer to ({x}, {y}){self._what(page, x, y)}"

    def _drag(self, page, start: tuple[int, int], end: tuple[int, int], button: str = "left") -> None:
        self._move(page, *start)
        page.mouse.down(button=button)
        self._move(page, *end, steps=DRAG_STEPS)
        page.mouse.up(button=button)

    def _do_dragTo(self, page, action, args):
        start = self._pointer
        end = self._point(action, args["x"], args["y"])
        what = self._what(page, *start)
        self._drag(page, start, end, args.get("button", "left"))
        return f"dragged from {start} to {end}" + (f" (started{what})" if what else "")

    def _do_swipe(self, page, action, args):
        w, h = self.width, self.height
        frm, to = args.get("from_coord"), args.get("to_coord")
        start = self._point(action, *frm) if frm is not None else (w // 2, h // 2)
        if to is not None:
            end = self._point(action, *to)
        else:  # the finger moves `direction` by `amount` of the screen, stopping at its edge
            amount = float(args.get("amount", 0.5))
            dx, dy = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}[args.get("direction", "up")]
            end = (min(w - 1, max(0, round(start[0] + dx * amount * w))),
                   min(h - 1, max(0, round(start[1] + dy * amount * h))))
        self._drag(page, start, end)
        return f"swiped from {start} to {end}"

    def _do_long_press(self, page, action, args):
        x, y = self._point(action, args["x"], args["y"])
        asked = float(args.get("duration", 1.0))
        duration = clamp(asked, self._deadline)
        what = self._what(page, x, y)
        self._move(page, x, y)
        page.mouse.down()
        page.wait_for_timeout(duration * 1000)
        page.mouse.up()
        return f"pressed ({x}, {y}) for {cut_seconds(duration, asked)}{what}"

    def _do_scroll(self, page, action, args):
        clicks = int(args["clicks"])
        if args.get("x") is not None or args.get("y") is not None:
            x, y = self._point(action, args.get("x"), args.get("y"))
            self._move(page, x, y)
        else:
            x, y = self._pointer
        before = page.evaluate("[scrollX, scrollY]")
        page.mouse.wheel(0, -clicks * NOTCH_PX)  # pyautogui's sign: positive scrolls up (content comes down)
        page.evaluate(FRAME_JS)  # wheel() does not wait for the scroll to happen
        after = page.evaluate("[scrollX, scrollY]")
        moved = "" if after != before else " (the page did not move: at its end, or nothing scrolls there)"
        n = abs(clicks)
        return f"scrolled {'up' if clicks > 0 else 'down'} {n} notch{'es' if n != 1 else ''} at ({x}, {y}){moved}"

    def _key(self, action: str, key) -> list[str]:
        """Playwright key names for `key` ('ctrl+c' gives two); an unknown key is an error listing examples."""
        if not isinstance(key, str) or not key:
            raise SandboxError(f"{action}: a key must be a non-empty name, got {key!r}; keys are {KEY_EXAMPLES}")
        if len(key) == 1:
            # Letters and digits by their key code, so a held Shift makes 'b' a 'B' (as on a real keyboard).
            if "a" <= key <= "z":
                return ["Key" + key.upper()]
            return ["Digit" + key] if key.isdigit() else [key]
        k = key.strip().lower()
        if "+" in k and len(k) > 1:
            return [n for part in k.split("+") for n in self._key(action, part.strip() or "+")]
        if k in KEYS:
            return [KEYS[k]]
        raise SandboxError(f"{action}: unknown key {key!r}; keys are names such as {KEY_EXAMPLES} (pyautogui's "
                           "names) or single characters; type text with write")

    def _do_press(self, page, action, args):
        keys = args["keys"]
        keys = [keys] if isinstance(keys, str) else list(keys)
        presses = int(args.get("presses", 1))
        combos = [self._key(action, k) for k in keys]  # all checked before any is pressed
        for _ in range(presses):
            for combo in combos:
                if len(combo) == 1:
                    page.keyboard.press(combo[0])
                else:
                    self._chord(page, combo)
        return f"pressed {', '.join(keys)}" + (f" {presses} times" if presses > 1 else "")

    def _chord(self, page, combo: list[str]) -> None:
        for k in combo:
            page.keyboard.down(k)
        for k in reversed(combo):
            page.keyboard.up(k)

    def _do_hotkey(self, page, action, args):
        keys = args["keys"]
        combo = [n for k in ([keys] if isinstance(keys, str) else keys) for n in self._key(action, k)]
        self._chord(page, combo)
        return f"pressed {'+'.join([keys] if isinstance(keys, str) else keys)}"

    def _do_keyDown(self, page, action, args):
        keys = self._key(action, args["key"])
        for k in keys:
            page.keyboard.down(k)
        return f"holding {args['key']} down"

    def _do_keyUp(self, page, action, args):
        keys = self._key(action, args["key"])
        for k in reversed(keys):
            page.keyboard.up(k)
        return f"released {args['key']}"

    def _do_write(self, page, action, args):
        message = str(args["message"])
        typed = 0
        while typed < len(message) and not passed(self._deadline):
            page.keyboard.type(message[typed:typed + TYPE_SLICE])
            typed += TYPE_SLICE
        return cut_typing(message, min(typed, len(message)))

    def _do_wait(self, page, action, args):
        asked = max(0.0, float(args.get("seconds", 3.0)))
        seconds = clamp(asked, self._deadline)
        page.wait_for_timeout(seconds * 1000)  # not time.sleep: the page's events keep coming
        return f"waited {cut_seconds(seconds, asked)}"

    def _do_navigate_back(self, page, action, args):
        from playwright.sync_api import TimeoutError as PwTimeout

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

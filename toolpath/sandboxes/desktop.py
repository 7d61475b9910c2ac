"""The desktop GUI sandbox: an X display (its own Xvfb by default), actions executed with pyautogui.

    DesktopSandbox(limits, display=None, screen="1280x720x24", launch=[...], start_url=None, settle=0.1,
                   windows=None)

Options (a task spec passes them in `sandbox.options`):
  display     None (default): start a private Xvfb on a free display number (`Xvfb -displayfd`, TCP off) and
              stop it at close(); ":N": use that running display; "env": use $DISPLAY (a user's real screen).
              On a display it did not start, the sandbox starts no server and only kills what it launched.
  screen      the Xvfb screen, "WxH" or "WxHxDEPTH" (default 1280x720x24); only for the sandbox's own Xvfb.
  launch      commands started on the display at start() and killed at close(): a list of argv lists, or of
              strings split like a shell would (shlex; no shell runs them); one string is one command.
              An argument "{python}" is the interpreter toolpath runs on (sys.executable).
  start_url   open this URL in the system Chromium (/usr/bin/chromium) as a real X window covering the screen:
              app + kiosk mode (no tabs, no address bar, no title bar), scale factor 1, sized to the screen,
              so page (CSS) pixel (x, y) is screen pixel (x, y). start() returns once the window is mapped
              and its title has changed from the URL to the page's <title> (the page has parsed); a page
              without a <title> (or with the host in it) gets up to 5 s. A fresh profile in a temp dir,
              no background networking. Chromium is not sandboxed (--no-sandbox): open pages you trust.
  settle      seconds to wait after each action for the screen to follow (default 0.1).
  windows     how many windows the launch commands open, which start() waits for (default one per
              command; 0: wait for none). start_url's window is always waited for.

The processes the sandbox starts get DISPLAY, XDG_SESSION_TYPE=x11, no WAYLAND_DISPLAY and, on its own Xvfb,
XAUTHORITY pointing at an empty file (the private server needs no cookie; the user's cookies stay out).
Each runs in its own process group and carries a marker in its environment, so close() finds and kills
even processes that left the group (Chromium's crash handler calls setsid).

Actions are tools.gui's desktop set (screen pixels) plus `swipe` (a drag from a point in a direction) and
`long_press` (press, hold, release). `navigate_back` is alt+Left (the back key of browsers and file
managers); `open_app` and `navigate_home` need a phone and are refused. There is no window manager on the
private Xvfb, so the sandbox does a window manager's one job that matters here: a click gives the keyboard
focus to the top-level window under the pointer (click-to-focus); with a window manager running (one the
user has, or one started with `launch`) it leaves focus to it.

`act(action, args, deadline=None)`: with a deadline (time.monotonic(), toolpath/deadline.py) the action ends by
it: a wait or a long press is cut short and typing stops (in slices of TYPE_SLICE characters); the account
says what was cut.

The actions themselves are ScreenSandbox's (sandboxes/screen.py), done with the pyautogui primitives below;
the X server, pyautogui's binding to one display at a time and the window helpers are sandboxes/xdisplay.py.
"""

from __future__ import annotations

import io
import itertools
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from ..deadline import clamp, passed
from .base import SandboxError, SandboxLimits, SandboxOptions, read_by
from .leftovers import kill_orphans, marked_pids, owner_marker, private_folder
from .screen import KEY_EXAMPLES, TYPE_SLICE, ScreenSandbox
from .xdisplay import (
    START_TIMEOUT,
    click_focus,
    focus_window,
    focused_window,
    kill_group,
    parse_screen,
    pointer_window,
    pyautogui_on,
    start_xvfb,
    unbind,
    window_geometry,
    window_ids,
    xdotool,
)

__all__ = ["DesktopSandbox", "CHROMIUM", "chromium_args"]

CHROMIUM = "/usr/bin/chromium"
DEFAULT_SCREEN = "1280x720x24"
TITLE_TIMEOUT = 5.0  # seconds start() waits for a start_url page to set its title
MARKER = "TOOLPATH_DESKTOP_SANDBOX"  # environment variable carried by everything the sandbox starts
DRAG_SECONDS = 0.3  # a drag moves in steps over this time, so programs see the motion between press and release
# Names models write for keys that pyautogui spells otherwise.
KEY_ALIASES = {"control": "ctrl", "ctl": "ctrl", "cmd": "win", "command": "win", "super": "win", "meta": "win",
               "windows": "win", "option": "alt", "arrowup": "up", "arrowdown": "down", "arrowleft": "left",
               "arrowright": "right", "page_up": "pageup", "page_down": "pagedown", "spacebar": "space",
               "caps_lock": "capslock", "escape": "esc", "bksp": "backspace", "ret": "enter",
               "return": "enter", "ins": "insert", "plus": "+", "minus": "-"}


def chromium_args(url: str, size: tuple[int, int], profile: str) -> list[str]:
    """The Chromium command line for start_url: a window of exactly `size` at (0, 0), nothing but the page."""
    w, h = size
    return [CHROMIUM, f"--app={url}", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
            f"--user-data-dir={profile}", "--window-position=0,0", f"--window-size={w},{h}",
            # kiosk drops the title bar Chromium draws itself when no window manager does; scale 1 and
            # X11 keep CSS pixels equal to screen pixels whatever the host's settings.
            "--kiosk", "--force-device-scale-factor=1", "--ozone-platform=x11", "--no-default-browser-check",
            "--password-store=basic", "--disable-domain-reliability", "--disable-client-side-phishing-detection",
            "--no-pings", "--disable-features=Translate,MediaRouter,OptimizationHints"]


def _parse_launch(launch) -> list[list[str]]:
    if launch is None:
        return []
    if isinstance(launch, str):
        launch = [launch]
    if not isinstance(launch, (list, tuple)):
        raise SandboxError(f"launch: expected a list of commands (argv lists or strings), got {launch!r}")
    out = []
    for i, cmd in enumerate(launch):
        try:
            argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
            # "{python}" is toolpath's own interpreter, so a spec runs a Python app without naming a venv
            argv = [sys.executable if a == "{python}" else a for a in argv]
        except (TypeError, ValueError) as err:
            raise SandboxError(f"launch[{i}]: cannot read {cmd!r} as a command: {err}") from None
        if not argv:
            raise SandboxError(f"launch[{i}]: empty command")
        out.append(argv)
    return out


def _display(value) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise SandboxError(f"display: expected ':N' (a running X display), 'env' (use $DISPLAY) or nothing "
                           f"(start a private Xvfb), got {value!r}")
    return value.strip() if value else None


def _start_url(value) -> str | None:
    if value is not None and (not isinstance(value, str) or "://" not in value
                              and not value.startswith(("about:", "data:"))):
        raise SandboxError(f"start_url: expected a URL such as 'http://127.0.0.1:8000/', got {value!r}")
    return value


def _settle(value) -> float:
    try:
        settle = float(value)
        if settle < 0 or settle > 30:
            raise ValueError
    except (TypeError, ValueError):
        raise SandboxError(f"settle: expected seconds between 0 and 30, got {value!r}") from None
    return settle


def _windows(value) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise SandboxError(f"windows: expected a number of windows (0 or more), got {value!r}")
    return value


# Each option's own reading (the constructor's too): a SandboxError naming it, or the value as the desktop uses it.
_READ = {"display": _display, "screen": lambda v: None if v is None else parse_screen(v), "launch": _parse_launch,
         "start_url": _start_url, "settle": _settle, "windows": _windows}


class DesktopOptions(SandboxOptions):
    display: str | None = Field(None, description="':N' (a running X display), 'env' ($DISPLAY) or unset (a "
                                                  "private Xvfb)")
    screen: Any = Field(None, description="the private Xvfb's 'WIDTHxHEIGHT[xDEPTH]'")
    launch: Any = Field(None, description="commands started on the display (argv lists or strings)")
    start_url: str | None = Field(None, description="a page a browser on the display opens")
    settle: float = Field(0.1, description="seconds to wait after an action before looking")
    windows: int | None = Field(None, description="windows to wait for (default: one per launched command)")

    _read = read_by(_READ)

    @field_validator("screen")
    @classmethod
    def _own_xvfb(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("display") is not None:
            raise ValueError("only applies to the Xvfb the sandbox starts itself; a given display keeps its size")
        return value


class DesktopSandbox(ScreenSandbox):
    """An X display an agent acts on with mouse and keyboard: the GUISandbox protocol for platform "desktop"."""

    platform = "desktop"
    KIND, THIS_IS, INSTEAD = "desktop", "a desktop", "use click, hotkey or write instead"
    Options = DesktopOptions

    def __init__(self, limits: SandboxLimits | None = None, display: str | None = None, screen=None,
                 launch=None, start_url: str | None = None, settle: float = 0.1, windows: int | None = None):
        self.limits = limits or SandboxLimits()
        self._want_display = _display(display)
        if self._want_display is not None and screen is not None:
            raise SandboxError("screen: only applies to the Xvfb the sandbox starts itself; a given display "
                               "keeps its own size")
        self._screen = parse_screen(DEFAULT_SCREEN if screen is None else screen)
        self._launch = _parse_launch(launch)
        self._start_url = _start_url(start_url)
        self.settle = _settle(settle)
        self._windows_wanted = _windows(windows)
        self.display: str | None = None
        self._size: tuple[int, int] | None = None
        self._token = owner_marker(uuid.uuid4().hex)  # names this process, so a later start finds our orphans
        self._tmp: str | None = None
        self._xvfb: subprocess.Popen | None = None
        self._procs: list[tuple[str, subprocess.Popen, Path]] = []  # (what, process, its stderr file)
        self._env: dict[str, str] = {}
        self._started = False
        self._deadline: float | None = None  # of the action being done (act's argument)
        self._closed = False
        self.notes: list[str] = []

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> DesktopSandbox:
        if self._started:
            return self
        if self._closed:
            raise SandboxError("this desktop sandbox is closed; open a new one")
        self._started = True
        try:
            # What a killed host left (its Xvfb, its apps, its folder) goes before this sandbox starts.
            kill_orphans(MARKER)
            self._tmp = str(private_folder("toolpath-desktop-"))
            env = {k: v for k, v in os.environ.items() if k != "WAYLAND_DISPLAY"}
            if self._want_display is None:
                auth = Path(self._tmp) / "Xauthority"
                auth.touch()
                env["XAUTHORITY"] = str(auth)
                started: list[subprocess.Popen] = []
                try:  # held as soon as it runs, so a start that fails later still stops it
                    self.display = start_xvfb(self._screen, Path(self._tmp), {**env, MARKER: self._token}, started)
                finally:
                    self._xvfb = started[0] if started else None
            elif self._want_display == "env":
                if not os.environ.get("DISPLAY"):
                    raise SandboxError("display='env' but DISPLAY is not set: there is no X display to use; "
                                       "leave display out to start a private Xvfb")
                self.display = os.environ["DISPLAY"]
            else:
                self.display = self._want_display
            env.update({"DISPLAY": self.display, "XDG_SESSION_TYPE": "x11", MARKER: self._token})
            self._env = env
            with self._x() as (_pg, x11):
                self._size = tuple(x11._size())
            before = self._window_ids()
            for i, argv in enumerate(self._launch):
                self._spawn(f"launch[{i}]", argv, env)
            wanted = len(self._launch) if self._windows_wanted is None else self._windows_wanted
            new = self._wait_windows(before, wanted)
            if self._start_url is not None:
                new = self._open_url(new)
            if new:
                self._focus(new[-1])
        except BaseException:
            self.close()
            raise
        return self

    def _spawn(self, what: str, argv: list[str], env: dict) -> subprocess.Popen:
        log = Path(self._tmp) / f"{len(self._procs)}.stderr"
        try:
            with open(log, "wb") as err:
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=err, start_new_session=True)
        except OSError as err:
            raise SandboxError(f"{what}: cannot run {shlex.join(argv)}: {err}") from None
        self._procs.append((what, proc, log))
        return proc

    def _open_url(self, before_new: list[str]) -> list[str]:
        """Chromium on start_url: wait for its window, make it exactly the screen, wait for the page's title."""
        if not os.path.exists(CHROMIUM):
            raise SandboxError(f"start_url needs Chromium at {CHROMIUM}: apt-get install chromium")
        profile = Path(self._tmp) / "chromium"
        profile.mkdir()
        env = {**self._env, "XDG_CONFIG_HOME": str(profile / "config"), "XDG_CACHE_HOME": str(profile / "cache")}
        before = self._window_ids()
        self._spawn("start_url", chromium_args(self._start_url, self._size, str(profile / "profile")), env)
        new = self._wait_windows(before, 1)
        if not new:
            return before_new
        areas = {i: (g[2] * g[3] if (g := self._geometry(i)) else 0) for i in new}
        win = max(new, key=areas.get)  # the browser window, not a helper window it may map too
        w, h = self._size
        # Chromium asks for one pixel less than a full-screen window; the page must cover every pixel.
        self._xdotool("windowmove", win, "0", "0")
        self._xdotool("windowsize", win, str(w), str(h))
        # Until the page has a title, Chromium names an app window after the URL ("127.0.0.1_/page.html").
        from urllib.parse import urlparse

        u = urlparse(self._start_url)
        placeholder = (u.netloc or u.path or self._start_url).lower()
        deadline = time.monotonic() + TITLE_TIMEOUT
        while True:
            name = self._xdotool("getwindowname", win) or ""
            if name.strip() and placeholder not in name.lower():
                break
            self._check_alive()
            if time.monotonic() > deadline:
                self.notes.append(f"start_url: the page set no title within {TITLE_TIMEOUT:.0f} s (window {name!r})")
                break
            time.sleep(0.05)
        # The title comes with the page's head; the first paint can follow a good half second later, until
        # then the window is one flat colour. Wait for something drawn (a page that is one colour: 5 s).
        from PIL import ImageGrab

        deadline = time.monotonic() + TITLE_TIMEOUT
        while time.monotonic() < deadline:
            # (not the last row and column: black root until the window's resize has gone through)
            extrema = ImageGrab.grab(xdisplay=self.display).convert("RGB").crop((0, 0, w - 1, h - 1)).getextrema()
            if any(lo != hi for lo, hi in extrema):
                break
            self._check_alive()
            time.sleep(0.05)
        else:
            self.notes.append(f"start_url: the window stayed one flat colour for {TITLE_TIMEOUT:.0f} s")
        time.sleep(self.settle)
        return before_new + [win]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        unbind(self._token)  # pyautogui must not keep talking to a server that is going away
        for _what, proc, _log in reversed(self._procs):
            kill_group(proc)
        if self._xvfb is not None:
            kill_group(self._xvfb)
        for pid in marked_pids(MARKER, self._token):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> DesktopSandbox:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # a sandbox dropped without close() still takes its Xvfb and programs with it
        if getattr(self, "_started", False) and not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception:
                pass

    # ----------------------------------------------------------------- X helpers

    def _x(self):
        """(pyautogui, its X11 module) bound to this sandbox's display, with the X lock held."""
        if not self._started or self._closed or self.display is None:
            raise SandboxError("the desktop sandbox is not running (start() it, or open a new one)")
        return pyautogui_on(self.display, self._env, self._token)

    def _xdotool(self, *args: str, timeout: float = 5.0) -> str | None:
        return xdotool(self._env, *args, timeout=timeout)

    def _window_ids(self) -> list[str]:
        return window_ids(self._env)

    def _geometry(self, win: str) -> tuple[int, int, int, int] | None:
        return window_geometry(self._env, win)

    def _check_alive(self) -> None:
        if self._xvfb is not None and self._xvfb.poll() is not None:
            raise SandboxError(f"the X server {self.display} exited (status {self._xvfb.returncode})")
        for what, proc, log in self._procs:
            if proc.poll() not in (None, 0):
                tail = log.read_text(errors="replace")[-400:].strip()
                raise SandboxError(f"{what} exited with status {proc.returncode} before its window appeared"
                                   + (f": {tail}" if tail else ""))

    def _wait_windows(self, before: list[str], count: int) -> list[str]:
        """Wait until `count` visible windows beyond `before` are mapped; their ids (xdotool's)."""
        if count <= 0:
            return []
        if shutil.which("xdotool") is None:
            self.notes.append("xdotool is not installed (apt-get install xdotool): start() waited 3 s for "
                              "windows instead of watching them appear")
            time.sleep(3.0)
            return []
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            new = [w for w in self._window_ids() if w not in before]
            if len(new) >= count:
                return new
            self._check_alive()
            if time.monotonic() > deadline:
                what = ", ".join(shlex.join(a) for a in self._launch) or "nothing"
                raise SandboxError(f"{count} window(s) expected within {START_TIMEOUT:.0f} s, {len(new)} appeared "
                                   f"(launched: {what}{'; start_url ' + self._start_url if self._start_url else ''})")
            time.sleep(0.05)

    def _focus(self, win: str) -> None:
        with self._x() as (_pg, x11):
            focus_window(x11._display, win)

    # ----------------------------------------------------------------- the protocol

    def screen_size(self) -> tuple[int, int]:
        if self._size is None or self._closed:
            raise SandboxError("the desktop sandbox is not running (start() it, or open a new one)")
        return self._size

    def screenshot(self) -> bytes:
        from PIL import ImageGrab

        w, h = self.screen_size()
        try:
            img = ImageGrab.grab(xdisplay=self.display)
        except OSError as err:
            raise SandboxError(f"screenshot: cannot read X display {self.display}: {err}") from None
        if img.size != (w, h):  # a display with several screens: the first one is the sandbox's screen
            img = img.crop((0, 0, w, h))
        if img.mode != "RGB":
            img = img.convert("RGB")
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    def observe(self) -> dict:
        out: dict = {"screen": list(self.screen_size()), "display": self.display}
        ids = self._window_ids() if shutil.which("xdotool") else None
        if ids is None:
            out["windows"] = []
            out["note"] = "xdotool is not installed (apt-get install xdotool): no window list"
        else:
            wins = []
            for wid in ids:
                geo = self._geometry(wid)
                if geo is None:
                    continue
                x, y, w, h = geo
                wins.append({"id": int(wid), "title": self._xdotool("getwindowname", wid) or "",
                             "box": [x, y, x + w, y + h]})
            out["windows"] = wins
        with self._x() as (_pg, x11):
            out["focused"] = focused_window(x11._display)
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    # ----------------------------------------------------------------- ScreenSandbox's hooks

    def _run(self, action: str, args: dict, deadline: float | None) -> str:
        self.screen_size()  # a closed sandbox says so, whatever the action
        return self._perform(action, args, deadline)

    def _settle(self, action: str) -> None:
        if self.settle and action != "wait":  # a wait has waited already
            time.sleep(clamp(self.settle, self._deadline))

    def _backend_errors(self):
        return Exception  # Xlib: the server went away, a broken connection

    def _failure(self, err: BaseException) -> str:
        return f"the X display {self.display} failed: {type(err).__name__}: {err}"

    # ----------------------------------------------------------------- primitives

    def _pointer_at(self) -> tuple[int, int]:
        with self._x() as (pg, _x11):
            return tuple(pg.position())

    def _move(self, x: int, y: int) -> None:
        with self._x() as (pg, _x11):
            pg.moveTo(x, y)

    def _describe(self, x: int, y: int) -> str:
        """The window under the pointer (which the actions have moved to (x, y) already)."""
        with self._x() as (_pg, x11):
            return pointer_window(x11._display)

    def _click(self, x: int, y: int, clicks: int, button: str) -> str:
        with self._x() as (pg, x11):
            pg.moveTo(x, y)
            click_focus(x11._display)
            # pyautogui sleeps `interval` after every click, the last one too: only between clicks of a double.
            pg.click(x, y, clicks=clicks, interval=0.04 if clicks > 1 else 0.0, button=button)
            return pointer_window(x11._display)

    def _drag(self, start: tuple[int, int], end: tuple[int, int], button: str) -> None:
        with self._x() as (pg, x11):
            pg.moveTo(*start)
            click_focus(x11._display)
            pg.mouseDown(button=button)
            pg.moveTo(*end, duration=DRAG_SECONDS)
            pg.mouseUp(button=button)

    def _press_down(self, x: int, y: int) -> str:
        with self._x() as (pg, x11):
            pg.moveTo(x, y)
            click_focus(x11._display)
            pg.mouseDown(button="left")
            return pointer_window(x11._display)

    def _mouse_up(self) -> None:
        with self._x() as (pg, _x11):
            pg.mouseUp(button="left")

    def _wheel(self, x: int, y: int, clicks: int) -> str:
        with self._x() as (pg, x11):
            pg.scroll(clicks)
            return pointer_window(x11._display)

    def _key_name(self, action: str, key: str, k: str) -> str:
        """pyautogui's name of one key; unknown, or without a key code on this display, is an error."""
        import pyautogui

        with self._x() as (_pg, x11):
            k = KEY_ALIASES.get(k, k)
            known = k in pyautogui.KEYBOARD_KEYS or len(k) == 1 and k in x11.keyboardMapping  # 'A' is shift+a
            if known and not x11.keyboardMapping.get(k):
                raise SandboxError(f"{action}: key {key!r} has no key code on X display {self.display}; "
                                   + ("type it with write" if len(k) == 1 else
                                      f"keys are names such as {KEY_EXAMPLES}"))
        if not known:
            near = [n for n in pyautogui.KEYBOARD_KEYS if len(n) > 1 and (n.startswith(k[:2]) if len(k) > 1 else False)]
            hint = f" (did you mean {', '.join(repr(n) for n in near[:5])}?)" if near else ""
            raise SandboxError(f"{action}: unknown key {key!r}{hint}; keys are names such as {KEY_EXAMPLES} "
                               "(pyautogui's KEYBOARD_KEYS); type text with write")
        return k

    def _press_key(self, name: str) -> None:
        with self._x() as (pg, _x11):
            pg.press(name)

    def _chord(self, names: list[str]) -> None:
        with self._x() as (pg, _x11):
            pg.hotkey(*names, interval=0.02)

    def _key_down(self, name: str) -> None:
        with self._x() as (pg, _x11):
            pg.keyDown(name)

    def _key_up(self, name: str) -> None:
        with self._x() as (pg, _x11):
            pg.keyUp(name)

    def _pause(self, seconds: float) -> None:
        time.sleep(seconds)  # outside the X lock: other sandboxes may act meanwhile

    def _do_navigate_back(self, action, args):
        with self._x() as (pg, _x11):
            pg.hotkey("alt", "left")
        return "pressed alt+left (back)"

    def _type(self, message: str) -> int:
        """Type `message` whole under the X lock (another thread's text never lands inside it), slice by slice
        until the deadline; how many characters were typed."""
        typed = 0
        with self._x() as (pg, x11):
            def typable(c: str) -> bool:
                return bool(x11.keyboardMapping.get(c))

            # pyautogui silently skips characters the key map lacks (accents, emoji): those go through
            # xdotool, which borrows a spare key code for them; without it, nothing is typed and we say why.
            odd = sorted({c for c in message if not typable(c)})
            if odd and shutil.which("xdotool") is None:
                raise SandboxError(f"write: cannot type {''.join(odd)!r} with pyautogui's key map and xdotool is "
                                   "not installed (apt-get install xdotool); nothing was typed")
            for ok, chars in itertools.groupby(message, typable):
                text = "".join(chars)
                for i in range(0, len(text), TYPE_SLICE):  # a look at the deadline between slices
                    if passed(self._deadline):
                        return typed
                    self._type_slice(x11, text[i:i + TYPE_SLICE], ok)
                    typed += len(text[i:i + TYPE_SLICE])
        return typed

    def _type_slice(self, x11, text: str, with_pyautogui: bool) -> None:
        if with_pyautogui:
            import pyautogui

            pyautogui.write(text)
            return
        x11._display.sync()
        # xdotool maps each character to a spare key code, presses it and maps the code back after --delay ms;
        # a program that reads the key event after that sees a key with no symbol (Tk logs '??') and types
        # nothing. 5 ms lost a character in about one write in five on a loaded machine, 30 ms one in a few hundred
        # under heavier load; these characters are rare (accents, emoji), so each gets a tenth of a second.
        r = subprocess.run(["xdotool", "type", "--delay", "100", "--", text], env=self._env,
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise SandboxError(f"write: xdotool could not type {text!r}: {r.stderr.strip()[:200]}")

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

pyautogui is process-wide state: it binds one Xlib display when first imported and keeps its key map for
that display. The sandbox serialises every pyautogui/Xlib call on one lock and, before each, re-binds
pyautogui to its own display when another sandbox (an earlier episode, another thread) used it last: so
sandboxes may open one after another, or side by side, in one process.
"""

from __future__ import annotations

import importlib
import io
import itertools
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

from ..deadline import clamp, cut_seconds, cut_typing, passed
from .base import KEY_EXAMPLES, SandboxError, SandboxLimits, check_screen_action
from .leftovers import kill_orphans, marked_pids, owner_marker, private_folder

__all__ = ["DesktopSandbox", "CHROMIUM", "chromium_args"]

CHROMIUM = "/usr/bin/chromium"
DEFAULT_SCREEN = "1280x720x24"
START_TIMEOUT = 30.0  # seconds for the X server, and for each launched program, to show up
TITLE_TIMEOUT = 5.0  # seconds start() waits for a start_url page to set its title
MARKER = "TOOLPATH_DESKTOP_SANDBOX"  # environment variable carried by everything the sandbox starts
DRAG_SECONDS = 0.3  # a drag moves in steps over this time, so programs see the motion between press and release
TYPE_SLICE = 50  # characters typed between two looks at the deadline
# Names models write for keys that pyautogui spells otherwise.
KEY_ALIASES = {"control": "ctrl", "ctl": "ctrl", "cmd": "win", "command": "win", "super": "win", "meta": "win",
               "windows": "win", "option": "alt", "arrowup": "up", "arrowdown": "down", "arrowleft": "left",
               "arrowright": "right", "page_up": "pageup", "page_down": "pagedown", "spacebar": "space",
               "caps_lock": "capslock", "escape": "esc", "bksp": "backspace", "ret": "enter",
               "return": "enter", "ins": "insert", "plus": "+", "minus": "-"}

# pyautogui and its Xlib connection are module globals: one caller at a time, whichever thread it is on.
_X_LOCK = threading.RLock()
_BOUND = {"token": None}  # the sandbox whose display pyautogui is bound to now


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


@contextmanager
def _environ(**values: str):
    """os.environ with these values while pyautogui (or a reload of its X11 module) reads them, then restored:
    its Xlib connection takes the display and the authority file from the environment, nowhere else."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _parse_screen(screen) -> tuple[int, int, int]:
    try:
        if isinstance(screen, str):
            parts = [int(p) for p in screen.lower().split("x")]
        else:
            parts = [int(p) for p in screen]
        if len(parts) == 2:
            parts.append(24)
        w, h, depth = parts
        if not (16 <= w <= 16384 and 16 <= h <= 16384 and depth in (8, 16, 24, 32)):
            raise ValueError
    except (TypeError, ValueError):
        raise SandboxError(f"screen: expected 'WIDTHxHEIGHT' or 'WIDTHxHEIGHTxDEPTH' such as '1280x720x24' "
                           f"(depth 8, 16, 24 or 32), got {screen!r}") from None
    return w, h, depth


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


def _kill_group(proc: subprocess.Popen, grace: float = 2.0) -> None:
    """SIGTERM the process's group (its children too), SIGKILL what is left after `grace` seconds."""
    if proc.poll() is None or _group_alive(proc.pid):
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(proc.pid):
                break
    try:
        proc.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class DesktopSandbox:
    """An X display an agent acts on with mouse and keyboard: the GUISandbox protocol for platform "desktop"."""

    platform = "desktop"
    OPTIONS = ("display", "screen", "launch", "start_url", "settle", "windows")

    def __init__(self, limits: SandboxLimits | None = None, display: str | None = None, screen=None,
                 launch=None, start_url: str | None = None, settle: float = 0.1, windows: int | None = None):
        self.limits = limits or SandboxLimits()
        if display is not None and (not isinstance(display, str) or not display.strip()):
            raise SandboxError(f"display: expected ':N' (a running X display), 'env' (use $DISPLAY) or nothing "
                               f"(start a private Xvfb), got {display!r}")
        self._want_display = display.strip() if display else None
        if self._want_display is not None and screen is not None:
            raise SandboxError("screen: only applies to the Xvfb the sandbox starts itself; a given display "
                               "keeps its own size")
        self._screen = _parse_screen(DEFAULT_SCREEN if screen is None else screen)
        self._launch = _parse_launch(launch)
        if start_url is not None and (not isinstance(start_url, str) or "://" not in start_url
                                      and not start_url.startswith(("about:", "data:"))):
            raise SandboxError(f"start_url: expected a URL such as 'http://127.0.0.1:8000/', got {start_url!r}")
        self._start_url = start_url
        try:
            self.settle = float(settle)
            if self.settle < 0 or self.settle > 30:
                raise ValueError
        except (TypeError, ValueError):
            raise SandboxError(f"settle: expected seconds between 0 and 30, got {settle!r}") from None
        if windows is not None and (not isinstance(windows, int) or isinstance(windows, bool) or windows < 0):
            raise SandboxError(f"windows: expected a number of windows (0 or more), got {windows!r}")
        self._windows_wanted = windows
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

    def start(self) -> "DesktopSandbox":
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
                self.display = self._start_xvfb(env)
            elif self._want_display == "env":
                if not os.environ.get("DISPLAY"):
                    raise SandboxError("display='env' but DISPLAY is not set: there is no X display to use; "
                                       "leave display out to start a private Xvfb")
                self.display = os.environ["DISPLAY"]
            else:
                self.display = self._want_display
            env.update({"DISPLAY": self.display, "XDG_SESSION_TYPE": "x11", MARKER: self._token})
            self._env = env
            with self._x() as (pg, x11):
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

    def _start_xvfb(self, env: dict) -> str:
        exe = shutil.which("Xvfb")
        if exe is None:
            raise SandboxError("Xvfb is not installed: apt-get install xvfb (or pass display=':N' / 'env' to use "
                               "a running X display)")
        w, h, depth = self._screen
        read_fd, write_fd = os.pipe()
        log = Path(self._tmp) / "xvfb.log"
        try:
            with open(log, "wb") as err:
                self._xvfb = subprocess.Popen(
                    [exe, "-displayfd", str(write_fd), "-screen", "0", f"{w}x{h}x{depth}", "-nolisten", "tcp",
                     "-noreset"], pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=err, env={**env, MARKER: self._token}, start_new_session=True)
            os.close(write_fd)
            write_fd = -1
            number, deadline = b"", time.monotonic() + START_TIMEOUT
            while not number.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or self._xvfb.poll() is not None:
                    break
                ready, _, _ = select.select([read_fd], [], [], min(left, 0.5))
                if ready:
                    chunk = os.read(read_fd, 32)
                    if not chunk:
                        break
                    number += chunk
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
        if not number.strip().isdigit():
            tail = log.read_text(errors="replace")[-500:].strip()
            raise SandboxError(f"Xvfb did not start within {START_TIMEOUT:.0f} s"
                               + (f" (exit {self._xvfb.returncode})" if self._xvfb.poll() is not None else "")
                               + (f": {tail}" if tail else ""))
        return f":{int(number)}"

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
        with _X_LOCK:  # pyautogui must not keep talking to a server that is going away
            if _BOUND["token"] == self._token:
                _BOUND["token"] = None
                try:
                    import pyautogui._pyautogui_x11 as x11

                    x11._display.close()
                except Exception:
                    pass
        for _what, proc, _log in reversed(self._procs):
            _kill_group(proc)
        if self._xvfb is not None:
            _kill_group(self._xvfb)
        for pid in marked_pids(MARKER, self._token):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "DesktopSandbox":
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

    @contextmanager
    def _x(self):
        """(pyautogui, its X11 module) bound to this sandbox's display, with the X lock held."""
        if not self._started or self._closed or self.display is None:
            raise SandboxError("the desktop sandbox is not running (start() it, or open a new one)")
        with _X_LOCK:
            if _BOUND["token"] != self._token:
                self._bind()
            import pyautogui
            import pyautogui._pyautogui_x11 as x11

            yield pyautogui, x11

    def _bind(self) -> None:
        """Point pyautogui's Xlib display and key map at this sandbox's display (lock held)."""
        auth = {"XAUTHORITY": self._env["XAUTHORITY"]} if "XAUTHORITY" in self._env else {}
        # python-xlib prints a warning for an empty authority file; the private Xvfb needs no cookie.
        with _environ(DISPLAY=self.display, **auth), redirect_stdout(io.StringIO()):
            try:
                first = "pyautogui" not in sys.modules
                import pyautogui
                import pyautogui._pyautogui_x11 as x11

                if not first:
                    old = x11._display
                    importlib.reload(x11)  # a new Display and a key map read from this server
                    try:
                        old.close()
                    except Exception:
                        pass
                else:
                    try:  # mouseinfo opens a display at import that nothing here uses
                        import mouseinfo

                        mouseinfo._display.close()
                    except Exception:
                        pass
            except ImportError as err:
                raise SandboxError(f"pyautogui is not installed ({err}): pip install pyautogui "
                                   "(or pip install 'toolpath[gui]')") from None
            except Exception as err:  # Xlib's connection errors
                raise SandboxError(f"cannot connect to X display {self.display}: {err}") from None
        pyautogui.FAILSAFE = False  # a click at (0, 0) is a legitimate action here, not an emergency stop
        pyautogui.PAUSE = 0.0  # the sandbox waits `settle` after each action instead
        _BOUND["token"] = self._token

    def _xdotool(self, *args: str, timeout: float = 5.0) -> str | None:
        """xdotool's output on this display, or None when xdotool is missing or fails."""
        if shutil.which("xdotool") is None:
            return None
        try:
            r = subprocess.run(["xdotool", *args], env=self._env, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    def _window_ids(self) -> list[str]:
        out = self._xdotool("search", "--onlyvisible", "--name", ".")
        return out.split() if out else []

    def _geometry(self, win: str) -> tuple[int, int, int, int] | None:
        out = self._xdotool("getwindowgeometry", "--shell", win)
        if not out:
            return None
        vals = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        try:
            return int(vals["X"]), int(vals["Y"]), int(vals["WIDTH"]), int(vals["HEIGHT"])
        except (KeyError, ValueError):
            return None

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
            from Xlib import X

            try:
                d = x11._display
                d.create_resource_object("window", int(win)).set_input_focus(X.RevertToPointerRoot, X.CurrentTime)
                d.sync()
            except Exception:  # the window went away: nothing to focus
                pass

    def _has_wm(self, d) -> bool:
        return d.screen().root.get_full_property(d.intern_atom("_NET_SUPPORTING_WM_CHECK"), 0) is not None

    def _top_under_pointer(self, d):
        """The top-level window under the pointer (a child of the root), or None over the bare root."""
        child = d.screen().root.query_pointer().child
        return child if child else None

    @staticmethod
    def _name(d, win, depth: int = 2) -> str:
        """A window's title (_NET_WM_NAME, else WM_NAME), looking into a window manager's frame if needed."""
        try:
            prop = win.get_full_property(d.intern_atom("_NET_WM_NAME"), d.intern_atom("UTF8_STRING"))
            name = prop.value if prop else win.get_wm_name()
            if isinstance(name, bytes):
                name = name.decode("utf-8", "replace")
            if name:
                return str(name)
            if depth > 0:
                for c in win.query_tree().children:
                    sub = DesktopSandbox._name(d, c, depth - 1)
                    if sub:
                        return sub
        except Exception:
            pass
        return ""

    def _click_focus(self, d) -> None:
        """What a window manager does on a click: the top-level window under the pointer gets the keyboard."""
        from Xlib import X

        if self._has_wm(d):
            return
        win = self._top_under_pointer(d)
        if win is None or win.get_attributes().override_redirect:  # menus and tooltips never take focus
            return
        focus = d.get_input_focus().focus
        if getattr(focus, "id", focus) == win.id:
            return
        win.set_input_focus(X.RevertToPointerRoot, X.CurrentTime)
        d.sync()

    def _where(self, d) -> str:
        win = self._top_under_pointer(d)
        name = self._name(d, win) if win is not None else ""
        return f" on {name!r}" if name else ""

    # ----------------------------------------------------------------- the protocol

    def screen_size(self) -> tuple[int, int]:
        if self._size is None or self._closed:
            raise SandboxError("the desktop sandbox is not running (start() it, or open a new one)")
        return self._size

    def screenshot(self) -> bytes:
        from PIL import Image, ImageGrab

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
            d = x11._display
            try:
                focus = d.get_input_focus().focus
                if not hasattr(focus, "id"):  # PointerRoot or None: the keyboard goes to the window under the pointer
                    focus = self._top_under_pointer(d)
                out["focused"] = self._name(d, focus) if focus is not None else ""
            except Exception:
                out["focused"] = ""
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def act(self, action: str, args: dict, deadline: float | None = None) -> str:
        check_screen_action(action, "desktop", "a desktop", "use click, hotkey or write instead")
        args = dict(args or {})
        self.screen_size()  # a closed sandbox says so, whatever the action
        self._deadline = deadline
        try:
            return self._act(action, args)
        finally:
            self._deadline = None

    def _act(self, action: str, args: dict) -> str:
        if action == "wait":
            asked = max(0.0, float(args.get("seconds", 3.0)))
            seconds = clamp(asked, self._deadline)
            time.sleep(seconds)
            return f"waited {cut_seconds(seconds, asked)}"
        try:
            text = getattr(self, "_do_" + action)(action, args)
        except SandboxError:
            raise
        except (TypeError, ValueError, KeyError) as err:
            raise SandboxError(f"{action}: bad arguments {args!r}: {err}") from None
        except Exception as err:  # Xlib: the server went away, a broken connection
            raise SandboxError(f"{action}: the X display {self.display} failed: {type(err).__name__}: {err}") from None
        if self.settle:
            time.sleep(clamp(self.settle, self._deadline))
        return text

    # ----------------------------------------------------------------- actions

    def _point(self, action: str, x, y, pg=None) -> tuple[int, int]:
        """(x, y) as integer screen pixels; a missing coordinate is the pointer's; off screen is an error."""
        w, h = self.screen_size()
        if x is None or y is None:
            px, py = pg.position()
            x = px if x is None else x
            y = py if y is None else y
        try:
            ix, iy = int(round(float(x))), int(round(float(y)))
        except (TypeError, ValueError):
            raise SandboxError(f"{action}: coordinates must be numbers, got ({x!r}, {y!r})") from None
        if not (0 <= ix < w and 0 <= iy < h):
            raise SandboxError(f"{action}: point ({ix}, {iy}) is off the screen, which spans x 0..{w - 1} and "
                               f"y 0..{h - 1}")
        return ix, iy

    def _press_at(self, action: str, args: dict, verb: str, clicks: int, button: str) -> str:
        with self._x() as (pg, x11):
            x, y = self._point(action, args.get("x"), args.get("y"), pg)
            pg.moveTo(x, y)
            self._click_focus(x11._display)
            # pyautogui sleeps `interval` after every click, the last one too: only between clicks of a double.
            pg.click(x, y, clicks=clicks, interval=0.04 if clicks > 1 else 0.0, button=button)
            return f"{verb} ({x}, {y}){self._where(x11._display)}"

    def _do_click(self, action, args):
        clicks, button = int(args.get("clicks", 1)), args.get("button", "left")
        verb = {1: "clicked", 2: "double-clicked", 3: "triple-clicked"}.get(clicks, f"clicked {clicks}x")
        return self._press_at(action, args, verb if button == "left" else f"{button}-{verb}", clicks, button)

    def _do_doubleClick(self, action, args):
        button = args.get("button", "left")
        return self._press_at(action, args, "double-clicked" if button == "left" else f"{button}-double-clicked",
                              2, button)

    def _do_rightClick(self, action, args):
        return self._press_at(action, args, "right-clicked", 1, "right")

    def _do_moveTo(self, action, args):
        with self._x() as (pg, x11):
            x, y = self._point(action, args["x"], args["y"])
            pg.moveTo(x, y)
            return f"moved the pointer to ({x}, {y}){self._where(x11._display)}"

    def _drag(self, action: str, start: tuple[int, int] | None, end: tuple[int, int], button: str) -> None:
        with self._x() as (pg, x11):
            if start is not None:
                pg.moveTo(*start)
            self._click_focus(x11._display)
            pg.mouseDown(button=button)
            pg.moveTo(*end, duration=DRAG_SECONDS)
            pg.mouseUp(button=button)

    def _do_dragTo(self, action, args):
        with self._x() as (pg, _x11):
            start = tuple(pg.position())
            end = self._point(action, args["x"], args["y"])
        self._drag(action, None, end, args.get("button", "left"))
        return f"dragged from {start} to {end}"

    def _do_swipe(self, action, args):
        w, h = self.screen_size()
        frm = args.get("from_coord")
        start = self._point(action, *frm) if frm is not None else (w // 2, h // 2)
        to = args.get("to_coord")
        if to is not None:
            end = self._point(action, *to)
        else:
            amount = float(args.get("amount", 0.5))
            dx, dy = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}[args.get("direction", "up")]
            # A swipe given by direction stops at the screen's edge rather than failing.
            end = (min(w - 1, max(0, round(start[0] + dx * amount * w))),
                   min(h - 1, max(0, round(start[1] + dy * amount * h))))
        self._drag(action, start, end, "left")
        return f"swiped from {start} to {end}"

    def _do_long_press(self, action, args):
        asked = float(args.get("duration", 1.0))
        duration = clamp(asked, self._deadline)
        with self._x() as (pg, x11):
            x, y = self._point(action, args["x"], args["y"])
            pg.moveTo(x, y)
            self._click_focus(x11._display)
            pg.mouseDown(button="left")
            where = self._where(x11._display)
        time.sleep(duration)  # outside the lock: other sandboxes may act meanwhile
        with self._x() as (pg, _x11):
            pg.mouseUp(button="left")
        return f"pressed ({x}, {y}) for {cut_seconds(duration, asked)}{where}"

    def _do_scroll(self, action, args):
        clicks = int(args["clicks"])
        with self._x() as (pg, x11):
            if args.get("x") is not None or args.get("y") is not None:
                x, y = self._point(action, args.get("x"), args.get("y"), pg)
                pg.moveTo(x, y)
            else:
                x, y = self._point(action, None, None, pg)
            pg.scroll(clicks)
            return (f"scrolled {'up' if clicks > 0 else 'down'} {abs(clicks)} notch{'es' if abs(clicks) != 1 else ''}"
                    f" at ({x}, {y}){self._where(x11._display)}")

    def _key(self, action: str, key: str, x11) -> list[str]:
        """The pyautogui key names of `key` (a combination such as 'ctrl+c' gives several); unknown is an error."""
        if not isinstance(key, str) or not key:
            raise SandboxError(f"{action}: a key must be a non-empty name, got {key!r}; keys are {KEY_EXAMPLES}")
        k = key if len(key) == 1 else key.strip().lower()
        if len(k) > 1 and "+" in k:
            return [n for part in k.split("+") for n in self._key(action, part.strip() or "+", x11)]
        k = KEY_ALIASES.get(k, k)
        import pyautogui

        known = k in pyautogui.KEYBOARD_KEYS or len(k) == 1 and k in x11.keyboardMapping  # 'A' is shift+a
        if known and not x11.keyboardMapping.get(k):
            raise SandboxError(f"{action}: key {key!r} has no key code on X display {self.display}; "
                               + ("type it with write" if len(k) == 1 else f"keys are names such as {KEY_EXAMPLES}"))
        if not known:
            near = [n for n in pyautogui.KEYBOARD_KEYS if len(n) > 1 and (n.startswith(k[:2]) if len(k) > 1 else False)]
            hint = f" (did you mean {', '.join(repr(n) for n in near[:5])}?)" if near else ""
            raise SandboxError(f"{action}: unknown key {key!r}{hint}; keys are names such as {KEY_EXAMPLES} "
                               "(pyautogui's KEYBOARD_KEYS); type text with write")
        return [k]

    def _do_press(self, action, args):
        keys = args["keys"]
        keys = [keys] if isinstance(keys, str) else list(keys)
        presses = int(args.get("presses", 1))
        with self._x() as (pg, x11):
            resolved = [self._key(action, k, x11) for k in keys]  # all checked before any is pressed
            for _ in range(presses):
                for combo in resolved:
                    if len(combo) == 1:
                        pg.press(combo[0])
                    else:
                        pg.hotkey(*combo)
        shown = ", ".join("+".join(c) for c in resolved)
        return f"pressed {shown}" + (f" {presses} times" if presses > 1 else "")

    def _do_hotkey(self, action, args):
        keys = args["keys"]
        keys = [keys] if isinstance(keys, str) else list(keys)
        with self._x() as (pg, x11):
            combo = [n for k in keys for n in self._key(action, k, x11)]
            pg.hotkey(*combo, interval=0.02)
        return f"pressed {'+'.join(combo)}"

    def _do_keyDown(self, action, args):
        with self._x() as (pg, x11):
            keys = self._key(action, args["key"], x11)
            for k in keys:
                pg.keyDown(k)
        return f"holding {'+'.join(keys)} down"

    def _do_keyUp(self, action, args):
        with self._x() as (pg, x11):
            keys = self._key(action, args["key"], x11)
            for k in reversed(keys):
                pg.keyUp(k)
        return f"released {'+'.join(keys)}"

    def _do_navigate_back(self, action, args):
        with self._x() as (pg, _x11):
            pg.hotkey("alt", "left")
        return "pressed alt+left (back)"

    def _do_write(self, action, args):
        message = str(args["message"])
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
                        return cut_typing(message, typed)
                    self._type(pg, x11, text[i:i + TYPE_SLICE], ok)
                    typed += len(text[i:i + TYPE_SLICE])
        return cut_typing(message, typed)

    def _type(self, pg, x11, text: str, with_pyautogui: bool) -> None:
        if with_pyautogui:
            pg.write(text)
            return
        x11._display.sync()
        r = subprocess.run(["xdotool", "type", "--delay", "5", "--", text], env=self._env,
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise SandboxError(f"write: xdotool could not type {text!r}: {r.stderr.strip()[:200]}")

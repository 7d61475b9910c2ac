"""X display management for the desktop sandbox: a private Xvfb, pyautogui bound to one display at a time,
xdotool's window list, and the few jobs of a window manager that matter to an agent (focus, titles).

pyautogui is process-wide state: it binds one Xlib display when first imported and keeps its key map for
that display. Every pyautogui/Xlib call goes through `pyautogui_on(display, env, token)`, which holds one lock
and, when another sandbox (an earlier episode, another thread) used pyautogui last, re-binds it to this
display first: so sandboxes may open one after another, or side by side, in one process.
"""

from __future__ import annotations

import importlib
import io
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

from .base import SandboxError

START_TIMEOUT = 30.0  # seconds for the X server, and for each launched program, to show up

# pyautogui and its Xlib connection are module globals: one caller at a time, whichever thread it is on.
_X_LOCK = threading.RLock()
_BOUND = {"token": None}  # the sandbox whose display pyautogui is bound to now


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


def parse_screen(screen) -> tuple[int, int, int]:
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


# ---- the X server and the programs on it ---------------------------------------------------------------

def start_xvfb(screen: tuple[int, int, int], folder: Path, env: dict, started: list) -> str:
    """Start Xvfb on a free display number (`-displayfd`, TCP off), in its own session; its display (":N").
    The process is appended to `started` as soon as it exists, so a caller whose start fails still stops it."""
    exe = shutil.which("Xvfb")
    if exe is None:
        raise SandboxError("Xvfb is not installed: apt-get install xvfb (or pass display=':N' / 'env' to use "
                           "a running X display)")
    w, h, depth = screen
    read_fd, write_fd = os.pipe()
    log = folder / "xvfb.log"
    try:
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                [exe, "-displayfd", str(write_fd), "-screen", "0", f"{w}x{h}x{depth}", "-nolisten", "tcp",
                 "-noreset"], pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err, env=env, start_new_session=True)
        started.append(proc)
        os.close(write_fd)
        write_fd = -1
        number, deadline = b"", time.monotonic() + START_TIMEOUT
        while not number.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None:
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
                           + (f" (exit {proc.returncode})" if proc.poll() is not None else "")
                           + (f": {tail}" if tail else ""))
    return f":{int(number)}"


def kill_group(proc: subprocess.Popen, grace: float = 2.0) -> None:
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


# ---- pyautogui on one display at a time ------------------------------------------------------------------

@contextmanager
def pyautogui_on(display: str, env: dict, token: str):
    """(pyautogui, its X11 module) bound to `display`, with the X lock held; `token` names the binding."""
    with _X_LOCK:
        if _BOUND["token"] != token:
            _bind(display, env, token)
        import pyautogui
        import pyautogui._pyautogui_x11 as x11

        yield pyautogui, x11


def _bind(display: str, env: dict, token: str) -> None:
    """Point pyautogui's Xlib display and key map at `display` (lock held)."""
    auth = {"XAUTHORITY": env["XAUTHORITY"]} if "XAUTHORITY" in env else {}
    # python-xlib prints a warning for an empty authority file; the private Xvfb needs no cookie.
    with _environ(DISPLAY=display, **auth), redirect_stdout(io.StringIO()):
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
            raise SandboxError(f"cannot connect to X display {display}: {err}") from None
    pyautogui.FAILSAFE = False  # a click at (0, 0) is a legitimate action here, not an emergency stop
    pyautogui.PAUSE = 0.0  # the sandbox waits `settle` after each action instead
    _BOUND["token"] = token


def unbind(token: str) -> None:
    """Close pyautogui's connection if it is bound to `token`'s display, which is going away."""
    with _X_LOCK:
        if _BOUND["token"] == token:
            _BOUND["token"] = None
            try:
                import pyautogui._pyautogui_x11 as x11

                x11._display.close()
            except Exception:
                pass


# ---- windows ------------------------------------------------------------------------------------------------

def xdotool(env: dict, *args: str, timeout: float = 5.0) -> str | None:
    """xdotool's output on the display of `env`, or None when xdotool is missing or fails."""
    if shutil.which("xdotool") is None:
        return None
    try:
        r = subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def window_ids(env: dict) -> list[str]:
    out = xdotool(env, "search", "--onlyvisible", "--name", ".")
    return out.split() if out else []


def window_geometry(env: dict, win: str) -> tuple[int, int, int, int] | None:
    out = xdotool(env, "getwindowgeometry", "--shell", win)
    if not out:
        return None
    vals = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    try:
        return int(vals["X"]), int(vals["Y"]), int(vals["WIDTH"]), int(vals["HEIGHT"])
    except (KeyError, ValueError):
        return None


def focus_window(d, win: str) -> None:
    """Give the keyboard to window `win` (xdotool's id) of Xlib display `d`; nothing if it went away."""
    from Xlib import X

    try:
        d.create_resource_object("window", int(win)).set_input_focus(X.RevertToPointerRoot, X.CurrentTime)
        d.sync()
    except Exception:
        pass


def has_window_manager(d) -> bool:
    return d.screen().root.get_full_property(d.intern_atom("_NET_SUPPORTING_WM_CHECK"), 0) is not None


def top_under_pointer(d):
    """The top-level window under the pointer (a child of the root), or None over the bare root."""
    child = d.screen().root.query_pointer().child
    return child if child else None


def window_name(d, win, depth: int = 2) -> str:
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
                sub = window_name(d, c, depth - 1)
                if sub:
                    return sub
    except Exception:
        pass
    return ""


def click_focus(d) -> None:
    """What a window manager does on a click: the top-level window under the pointer gets the keyboard.
    With a window manager running, focus is left to it."""
    from Xlib import X

    if has_window_manager(d):
        return
    win = top_under_pointer(d)
    if win is None or win.get_attributes().override_redirect:  # menus and tooltips never take focus
        return
    focus = d.get_input_focus().focus
    if getattr(focus, "id", focus) == win.id:
        return
    win.set_input_focus(X.RevertToPointerRoot, X.CurrentTime)
    d.sync()


def pointer_window(d) -> str:
    """" on 'title'" of the window under the pointer, for an action's account; "" over the bare root."""
    win = top_under_pointer(d)
    name = window_name(d, win) if win is not None else ""
    return f" on {name!r}" if name else ""


def focused_window(d) -> str:
    """The title of the window that has the keyboard ("" when none can be told)."""
    try:
        focus = d.get_input_focus().focus
        if not hasattr(focus, "id"):  # PointerRoot or None: the keyboard goes to the window under the pointer
            focus = top_under_pointer(d)
        return window_name(d, focus) if focus is not None else ""
    except Exception:
        return ""

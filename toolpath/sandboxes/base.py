"""The Sandbox protocol: where side effects happen. One per episode, a context manager, with limits.

What a sandbox cannot do is reported as a `SandboxError` (or in the result it returns), which the tool turns
into an error observation the agent sees; a sandbox never takes the run down with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SandboxError(RuntimeError):
    """The sandbox could not start, or could not do what was asked."""


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 60  # CPU time of the whole kernel (RLIMIT_CPU)
    memory_mb: int = 2048  # address space (RLIMIT_AS)
    processes: int = 64  # tasks in the sandbox (cgroup pids.max where writable, else RLIMIT_NPROC)
    open_files: int = 256  # RLIMIT_NOFILE
    file_size_mb: int = 64  # largest file it may write (RLIMIT_FSIZE)
    disk_mb: int = 256  # what each memory-backed folder (/episode, /tmp, /dev/shm) may hold
    output_bytes: int = 20_000  # stdout / stderr kept per cell
    cell_seconds: float = 30.0  # wall clock per cell; past it the kernel is killed and restarted
    images: int = 10  # images returned per cell

    def __post_init__(self) -> None:
        for name, (low, high, unit) in LIMIT_RANGES.items():
            _check_limit(name, getattr(self, name), low, high, unit, whole=name != "cell_seconds")


# What each limit may be: (lowest, highest, unit). The highest values keep the kernel's own arithmetic (bytes
# in a 64-bit rlimit, a pipe line the host reads) far from overflow; they are not advice.
LIMIT_RANGES = {"cpu_seconds": (1, 10_000_000, "s"), "memory_mb": (1, 1 << 20, "MB"), "processes": (1, 1 << 22, ""),
                "open_files": (1, 1 << 20, ""), "file_size_mb": (1, 1 << 20, "MB"), "disk_mb": (1, 1 << 20, "MB"),
                "output_bytes": (1, 1_000_000, "bytes"), "cell_seconds": (0.001, 7 * 86_400, "s"),
                "images": (0, 1000, "")}


def _check_limit(name: str, value, low, high, unit: str, whole: bool) -> None:
    """SandboxError naming the spec field unless `value` is a number of the right kind within [low, high]."""
    kind = (int,) if whole else (int, float)
    ok = isinstance(value, kind) and not isinstance(value, bool) and low <= value <= high  # NaN fails the range
    if not ok:
        what = "a whole number" if whole else "a number"
        raise SandboxError(f"sandbox.options.{name}: expected {what} from {low} to {high}"
                           f"{' ' + unit if unit else ''}, got {value!r}")


class Sandbox(Protocol):
    limits: SandboxLimits

    def start(self) -> "Sandbox": ...

    def close(self) -> None: ...

    def __enter__(self) -> "Sandbox": ...

    def __exit__(self, *exc) -> None: ...


# The part of tools/gui.py's action space a screen sandbox (browser, desktop) executes. The ending actions
# (response, terminate, call_user) are the agent's; open_app and navigate_home need a phone.
ENDING_ACTIONS = ("response", "terminate", "call_user")
PHONE_ONLY_ACTIONS = ("open_app", "navigate_home")
SCREEN_ACTIONS = ("click", "doubleClick", "rightClick", "moveTo", "dragTo", "scroll", "press", "hotkey", "keyDown",
                  "keyUp", "write", "wait", "swipe", "long_press", "navigate_back")
KEY_EXAMPLES = "'enter', 'tab', 'esc', 'backspace', 'delete', 'ctrl', 'shift', 'alt', 'up', 'pagedown', 'f5', 'a'"


def check_screen_action(action: str, kind: str, this_is: str, instead: str) -> None:
    """SandboxError unless a screen sandbox of `kind` executes `action` (said the same way by each of them)."""
    if action in ENDING_ACTIONS:
        raise SandboxError(f"{action}: ends the episode; the agent handles it, a sandbox does not execute it")
    if action in PHONE_ONLY_ACTIONS:
        raise SandboxError(f"{action}: needs a phone; this is {this_is} ({instead})")
    if action not in SCREEN_ACTIONS:
        raise SandboxError(f"unknown action {action!r}; a {kind} does {', '.join(SCREEN_ACTIONS)}")


class GUISandbox(Sandbox, Protocol):
    """A screen an agent acts on (sandboxes/browser.py, sandboxes/desktop.py): what tools/gui.py executes through.

    Coordinates here are always screen pixels of `screen_size()` (the screenshot's own pixels); the agent has
    converted the model's convention already. `act` gets arguments the action's model in tools/gui.py has
    validated (None values dropped); what it cannot do (an action this platform lacks, a key it does not know,
    a point off screen, a page that did not load) is a SandboxError naming the action and why.
    """

    platform: str  # "web", "desktop" or "phone": which of tools.gui.PLATFORMS the agent offers

    def screen_size(self) -> tuple[int, int]: ...  # (width, height) in pixels

    def screenshot(self) -> bytes: ...  # PNG, exactly screen_size() pixels

    # A short account of what happened, for the agent. `deadline` (time.monotonic()) is when the step's time
    # runs out: a wait is cut short, typing stops, no page is waited for beyond it, and the account says what
    # was cut (toolpath/deadline.py).
    def act(self, action: str, args: dict, deadline: float | None = None) -> str: ...

    def observe(self) -> dict: ...  # text facts of the current screen: {"url", "title", "dom", "windows", ...}

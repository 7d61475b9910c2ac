"""Screens an agent acts on: the GUISandbox protocol, the action space it executes, and ScreenSandbox, what
every screen sandbox (browser.py, desktop.py) does the same way on top of a few primitives each supplies.

The base owns the action space of the GUISandbox protocol (below): which actions it executes,
their dispatch, the checks of a point (numbers, on the screen, the pointer's when missing), the geometry of a
swipe, key combinations ('ctrl+c'), how a step's deadline cuts a wait, a long press or typing, and the text of
the account each action returns. A subclass supplies:

    KIND, THIS_IS, INSTEAD        how errors name the sandbox ("browser", "a web browser", what to do instead)
    screen_size()                 (width, height) in pixels
    _run(action, args, deadline)  call _perform(action, args, deadline) where the backend can act (a thread)
    _pointer_at()                 where the pointer is
    _move(x, y)                   move the pointer
    _describe(x, y)               " on <what is there>", or ""
    _click(x, y, clicks, button)  click there; returns _describe's text (taken before or after, as it can)
    _drag(start, end, button)     press at start, move to end, release
    _press_down(x, y)             move there and hold the left button; returns _describe's text
    _mouse_up()                   release the left button
    _wheel(x, y, clicks)          scroll `clicks` notches (positive: up); returns a note for the account
    _key_name(action, key, k)     one key's name for the backend (k: key lowered and stripped, unless a
                                  single character); an unknown key is a SandboxError
    _press_key(name), _chord(names), _key_down(name), _key_up(name)
    _type(message)                type it, slice by slice, until the deadline; returns how many were typed
    _pause(seconds)               wait, letting the screen live on
    _do_navigate_back(action, args)
and may override the hooks around an action: _before_action, _settle(action), _account(text),
_backend_errors() and _failure(err).
"""

from __future__ import annotations

from typing import Protocol

from ..deadline import clamp, cut_seconds, cut_typing
from .base import Sandbox, SandboxError

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


TYPE_SLICE = 50  # characters typed between two looks at the deadline
# A swipe given by a direction moves the finger that way, by `amount` of the screen.
SWIPE_DIRECTIONS = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


def click_verb(clicks: int, button: str) -> str:
    verb = {1: "clicked", 2: "double-clicked", 3: "triple-clicked"}.get(clicks, f"clicked {clicks}x")
    return verb if button == "left" else f"{button}-{verb}"


class ScreenSandbox:
    """The shared half of a screen sandbox; see the module's docstring for what a subclass supplies."""

    KIND = "screen"
    THIS_IS = "a screen"
    INSTEAD = "use click instead"
    _deadline: float | None = None  # of the action being done (act's argument)

    # ---- the protocol's act -----------------------------------------------------------------------------

    def act(self, action: str, args: dict, deadline: float | None = None) -> str:
        check_screen_action(action, self.KIND, self.THIS_IS, self.INSTEAD)
        return self._run(action, dict(args or {}), deadline)

    def _run(self, action: str, args: dict, deadline: float | None) -> str:
        return self._perform(action, args, deadline)

    def _perform(self, action: str, args: dict, deadline: float | None) -> str:
        """Do the action now (on the backend's thread) and return its account."""
        self._deadline = deadline
        try:
            self._before_action()
            try:
                text = getattr(self, "_do_" + action)(action, args)  # check_screen_action vetted the name
                self._settle(action)
            except SandboxError:
                raise
            except (TypeError, ValueError, KeyError, OverflowError) as err:
                raise SandboxError(f"{action}: bad arguments {args!r}: {err}") from None
            except self._backend_errors() as err:
                raise SandboxError(f"{action}: {self._failure(err)}") from None
            return self._account(text)
        finally:
            self._deadline = None

    def _before_action(self) -> None:
        """What the backend notes before an action (the page it is on)."""

    def _settle(self, action: str) -> None:
        """Let the screen follow what the action did, before the next screenshot."""

    def _account(self, text: str) -> str:
        """The action's account, with what the backend saw happen meanwhile."""
        return text

    def _backend_errors(self) -> type[BaseException] | tuple[type[BaseException], ...]:
        return ()

    def _failure(self, err: BaseException) -> str:
        return f"{type(err).__name__}: {err}"

    # ---- points and keys --------------------------------------------------------------------------------

    def _point(self, action: str, x, y) -> tuple[int, int]:
        """(x, y) as integer screen pixels; a missing coordinate is the pointer's; off screen is an error."""
        w, h = self.screen_size()
        if x is None or y is None:
            px, py = self._pointer_at()
            x = px if x is None else x
            y = py if y is None else y
        try:
            ix, iy = int(round(float(x))), int(round(float(y)))
        except (TypeError, ValueError, OverflowError):
            raise SandboxError(f"{action}: coordinates must be numbers, got ({x!r}, {y!r})") from None
        if not (0 <= ix < w and 0 <= iy < h):
            raise SandboxError(f"{action}: point ({ix}, {iy}) is off the screen, which spans x 0..{w - 1} "
                               f"and y 0..{h - 1}")
        return ix, iy

    def _keys(self, action: str, key) -> list[str]:
        """The backend's names for `key` ('ctrl+c' gives two); an unknown key is an error listing examples."""
        if not isinstance(key, str) or not key:
            raise SandboxError(f"{action}: a key must be a non-empty name, got {key!r}; keys are {KEY_EXAMPLES}")
        if len(key) == 1:
            return [self._key_name(action, key, key)]
        k = key.strip().lower()
        if "+" in k and len(k) > 1:
            return [n for part in k.split("+") for n in self._keys(action, part.strip() or "+")]
        return [self._key_name(action, key, k)]

    # ---- the actions ------------------------------------------------------------------------------------

    def _press_at(self, action: str, args: dict, clicks: int, button: str) -> str:
        x, y = self._point(action, args.get("x"), args.get("y"))
        what = self._click(x, y, clicks, button)
        return f"{click_verb(clicks, button)} ({x}, {y}){what}"

    def _do_click(self, action, args):
        return self._press_at(action, args, int(args.get("clicks", 1)), args.get("button", "left"))

    def _do_doubleClick(self, action, args):
        return self._press_at(action, args, 2, args.get("button", "left"))

    def _do_rightClick(self, action, args):
        return self._press_at(action, args, 1, "right")

    def _do_moveTo(self, action, args):
        x, y = self._point(action, args["x"], args["y"])
        self._move(x, y)
        return f"moved the pointer to ({x}, {y}){self._describe(x, y)}"

    def _do_dragTo(self, action, args):
        start = tuple(self._pointer_at())
        end = self._point(action, args["x"], args["y"])
        what = self._describe(*start)
        self._drag(start, end, args.get("button", "left"))
        return f"dragged from {start} to {end}" + (f" (started{what})" if what else "")

    def _do_swipe(self, action, args):
        w, h = self.screen_size()
        frm, to = args.get("from_coord"), args.get("to_coord")
        start = self._point(action, *frm) if frm is not None else (w // 2, h // 2)
        if to is not None:
            end = self._point(action, *to)
        else:  # the finger moves `direction` by `amount` of the screen, stopping at its edge rather than failing
            amount = float(args.get("amount", 0.5))
            dx, dy = SWIPE_DIRECTIONS[args.get("direction", "up")]
            end = (min(w - 1, max(0, round(start[0] + dx * amount * w))),
                   min(h - 1, max(0, round(start[1] + dy * amount * h))))
        self._drag(start, end, "left")
        return f"swiped from {start} to {end}"

    def _do_long_press(self, action, args):
        x, y = self._point(action, args["x"], args["y"])
        asked = float(args.get("duration", 1.0))
        duration = clamp(asked, self._deadline)
        what = self._press_down(x, y)
        self._pause(duration)
        self._mouse_up()
        return f"pressed ({x}, {y}) for {cut_seconds(duration, asked)}{what}"

    def _do_scroll(self, action, args):
        clicks = int(args["clicks"])
        x, y = self._point(action, args.get("x"), args.get("y"))
        if args.get("x") is not None or args.get("y") is not None:
            self._move(x, y)
        note = self._wheel(x, y, clicks)
        n = abs(clicks)
        return f"scrolled {'up' if clicks > 0 else 'down'} {n} notch{'es' if n != 1 else ''} at ({x}, {y}){note}"

    def _do_press(self, action, args):
        keys = args["keys"]
        keys = [keys] if isinstance(keys, str) else list(keys)
        presses = int(args.get("presses", 1))
        combos = [self._keys(action, k) for k in keys]  # all checked before any is pressed
        for _ in range(presses):
            for combo in combos:
                if len(combo) == 1:
                    self._press_key(combo[0])
                else:
                    self._chord(combo)
        return f"pressed {', '.join(keys)}" + (f" {presses} times" if presses > 1 else "")

    def _do_hotkey(self, action, args):
        keys = args["keys"]
        keys = [keys] if isinstance(keys, str) else list(keys)
        self._chord([n for k in keys for n in self._keys(action, k)])
        return f"pressed {'+'.join(keys)}"

    def _do_keyDown(self, action, args):
        for k in self._keys(action, args["key"]):
            self._key_down(k)
        return f"holding {args['key']} down"

    def _do_keyUp(self, action, args):
        for k in reversed(self._keys(action, args["key"])):
            self._key_up(k)
        return f"released {args['key']}"

    def _do_write(self, action, args):
        message = str(args["message"])
        return cut_typing(message, min(self._type(message), len(message)))

    def _do_wait(self, action, args):
        asked = max(0.0, float(args.get("seconds", 3.0)))
        seconds = clamp(asked, self._deadline)
        self._pause(seconds)
        return f"waited {cut_seconds(seconds, asked)}"

"""ScaleCUA's unified GUI action space: one typed tool per action, executed by the episode's GUI sandbox.

    desktop   click(x, y, clicks=1, button="left")  doubleClick(x, y, button)  rightClick(x, y)  moveTo(x, y)
              dragTo(x, y, button)  scroll(clicks, x, y)  press(keys, presses=1)  hotkey(*keys)  keyDown(key)
              keyUp(key)  write(message)  wait(seconds=3)  call_user()  response(answer)  terminate(status, info)
    web       the desktop actions and swipe
    phone     click  long_press(x, y, duration)  swipe(from_coord, to_coord, direction, amount)  write
              open_app(name)  navigate_home()  navigate_back()  wait  call_user  response  terminate

The tools take **screen pixels**: the computer-use agent converts the model's coordinates (absolute in the
resized image, normalised, or a 0–1000 grid; toolpath/coords.py) before it calls them, and records both. Any
agent with a JSON-calling policy can call them directly in pixels too.

A tool validates its arguments (pydantic: a bad button, a swipe without direction, a negative wait is an
error naming the argument), then hands `(action, arguments)` to `ctx.sandbox.act`, the GUI sandbox protocol
(sandboxes/screen.py), with the step's deadline when it has one (`ctx.deadline`, see toolpath/deadline.py): the
sandbox cuts a wait short, stops typing and waits for no page beyond it. One action is bounded on its own too:
`write` types at most MAX_WRITE_CHARS characters (the rest is reported, not typed), `press` and `hotkey` take
at most MAX_KEYS keys. `response`, `terminate` and `call_user` are not executed: they end the episode, and
the agent decides how (tools/gui.py only marks them final).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..sandboxes.screen import ENDING_ACTIONS
from .registry import Tool, ToolContext, ToolError, ToolResult, add_tool

# What one action may ask for: typing 100,000 characters would take minutes, so a longer write is cut (and the
# model told); no real chord or key sequence needs more keys than this.
MAX_WRITE_CHARS = 2000
MAX_KEYS = 16

Button = Literal["left", "right", "middle"]
Direction = Literal["up", "down", "left", "right"]
X = Field(None, description="horizontal screen coordinate; omitted: where the pointer is")
Y = Field(None, description="vertical screen coordinate; omitted: where the pointer is")


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")


class click(Action):
    """Click at a point: `clicks` times with `button`."""

    x: float | None = X
    y: float | None = Y
    clicks: int = Field(1, ge=1, le=3, description="1, 2 (double) or 3 (triple) clicks")
    button: Button = "left"


class doubleClick(Action):
    """Double-click at a point."""

    x: float | None = X
    y: float | None = Y
    button: Button = "left"


class rightClick(Action):
    """Right-click at a point (opens a context menu)."""

    x: float | None = X
    y: float | None = Y


class moveTo(Action):
    """Move the pointer to a point without clicking (hover)."""

    x: float = Field(description="horizontal screen coordinate")
    y: float = Field(description="vertical screen coordinate")


class dragTo(Action):
    """Press `button` where the pointer is, drag to the point, release."""

    x: float = Field(description="horizontal screen coordinate to drag to")
    y: float = Field(description="vertical screen coordinate to drag to")
    button: Button = "left"


class scroll(Action):
    """Scroll the wheel `clicks` notches: positive scrolls up, negative down; at a point if given."""

    clicks: int = Field(description="wheel notches; positive up, negative down")
    x: float | None = X
    y: float | None = Y

    @field_validator("clicks")
    @classmethod
    def _nonzero(cls, v: int) -> int:
        if v == 0 or abs(v) > 100:
            raise ValueError("clicks must be a non-zero number of notches, at most 100 either way")
        return v


KeyList = list[str]


def _keys(v: Any) -> list[str]:
    keys = [v] if isinstance(v, str) else v
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k.strip() for k in keys):
        raise ValueError("expected a key name or a non-empty list of key names such as 'enter' or ['ctrl', 'c']")
    if len(keys) > MAX_KEYS:
        raise ValueError(f"at most {MAX_KEYS} keys in one action, got {len(keys)}")
    return [k.strip().lower() for k in keys]


class press(Action):
    """Press and release a key (or each key of a list in turn), `presses` times."""

    keys: str | KeyList = Field(description="a key name ('enter', 'tab', 'a') or a list of them")
    presses: int = Field(1, ge=1, le=50)

    @field_validator("keys", mode="before")
    @classmethod
    def _check(cls, v: Any) -> list[str]:
        return _keys(v)


class hotkey(Action):
    """Press keys together, like ctrl+c: down in order, up in reverse."""

    keys: KeyList = Field(description="the keys, e.g. ['ctrl', 'c']")

    @field_validator("keys", mode="before")
    @classmethod
    def _check(cls, v: Any) -> list[str]:
        return _keys(v)


class keyDown(Action):
    """Hold a key down (release it with keyUp)."""

    key: str = Field(description="key name, e.g. 'shift'")


class keyUp(Action):
    """Release a key held with keyDown."""

    key: str = Field(description="key name, e.g. 'shift'")


class write(Action):
    """Type text at the keyboard focus."""

    message: str = Field(description=f"the text to type (one write types at most {MAX_WRITE_CHARS} characters)")


class wait(Action):
    """Wait for the screen to change (a page loading)."""

    seconds: float = Field(3.0, ge=0.0, le=60.0)


class swipe(Action):
    """Swipe from one point to another, or from the centre (or from_coord) in `direction` by `amount` of the screen."""

    from_coord: list[float] | None = Field(None, description="[x, y] where the swipe starts; default the screen centre")
    to_coord: list[float] | None = Field(None, description="[x, y] where it ends; default from direction and amount")
    direction: Direction = "up"
    amount: float = Field(0.5, gt=0.0, le=1.0, description="fraction of the screen to move when to_coord is not given")

    @field_validator("from_coord", "to_coord")
    @classmethod
    def _point(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and len(v) != 2:
            raise ValueError("expected [x, y]")
        return v


class long_press(Action):
    """Touch and hold at a point."""

    x: float = Field(description="horizontal screen coordinate")
    y: float = Field(description="vertical screen coordinate")
    duration: float = Field(1.0, gt=0.0, le=10.0, description="seconds to hold")


class open_app(Action):
    """Open an app by name (phone)."""

    name: str = Field(min_length=1, description="the app's name")


class navigate_home(Action):
    """Go to the home screen (phone)."""



class navigate_back(Action):
    """Go back (phone back button; browser back)."""



class call_user(Action):
    """Ask the user for help: the task cannot go on without them (a login, an infeasible request)."""



class response(Action):
    """Give the answer the task asks for (information-seeking tasks); ends the episode."""

    answer: str = Field(description="the answer")


class terminate(Action):
    """End the episode: status success when the task is done, failure when it cannot be."""

    status: Literal["success", "failure"] = "success"
    info: str = ""

    @model_validator(mode="before")
    @classmethod
    def _lower(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("status"), str):
            data = {**data, "status": data["status"].strip().lower()}
        return data


ACTIONS: dict[str, type[Action]] = {c.__name__: c for c in (
    click, doubleClick, rightClick, moveTo, dragTo, scroll, press, hotkey, keyDown, keyUp, write, wait, swipe,
    long_press, open_app, navigate_home, navigate_back, call_user, response, terminate)}
ENDING = frozenset(ENDING_ACTIONS)  # actions the agent handles; never sent to a sandbox

_DESKTOP = ["click", "doubleClick", "rightClick", "moveTo", "dragTo", "scroll", "press", "hotkey", "keyDown", "keyUp",
            "write", "wait", "call_user", "response", "terminate"]
PLATFORMS: dict[str, list[str]] = {
    "desktop": _DESKTOP,
    "web": _DESKTOP + ["swipe"],
    "phone": ["click", "long_press", "swipe", "write", "open_app", "navigate_home", "navigate_back", "wait",
              "call_user", "response", "terminate"],
}


def point_fields(name: str) -> tuple:
    """The coordinate fields of action `name`, which the agent converts from the model's convention to screen
    pixels: ("x", "y") for a point given as two numbers, "from_coord"/"to_coord" for [x, y] lists."""
    fields = ACTIONS[name].model_fields
    out: list = [("x", "y")] if "x" in fields else []
    return tuple(out + [f for f in ("from_coord", "to_coord") if f in fields])


def _execute(name: str):
    def run(ctx: ToolContext, **arguments: Any) -> ToolResult:
        if name in ENDING:
            return ToolResult(content=str(arguments.get("answer", arguments.get("info", ""))), final=True,
                              data={"action": name, **arguments})
        box = ctx.sandbox
        if box is None or not callable(getattr(box, "act", None)):
            raise ToolError(f"{name}: this episode has no GUI sandbox (use sandbox: browser or desktop)")
        args = {k: v for k, v in arguments.items() if v is not None}
        args, cut = _bounded(name, args)
        from ..sandboxes.base import SandboxError

        deadline = ctx.deadline
        try:
            done = box.act(name, args, deadline=deadline)
        except SandboxError as err:
            raise ToolError(f"{name}: {err}") from None
        return ToolResult(content="; ".join(filter(None, [done or f"{name} done", cut])), data={"action": name, **args})

    return run


def _bounded(name: str, args: dict) -> tuple[dict, str]:
    """The arguments one action may take (a write cut to MAX_WRITE_CHARS), and a note of what was cut."""
    message = args.get("message")
    if name != "write" or not isinstance(message, str) or len(message) <= MAX_WRITE_CHARS:
        return args, ""
    note = (f"not typed: the last {len(message) - MAX_WRITE_CHARS} of {len(message)} characters (one write types "
            f"at most {MAX_WRITE_CHARS}; write the rest in further writes)")
    return {**args, "message": message[:MAX_WRITE_CHARS]}, note


def _register() -> None:
    from .registry import _Args

    for name, model in ACTIONS.items():
        args_model = type(f"{name}_args", (model, _Args), {"__doc__": model.__doc__})
        add_tool(Tool(name=name, description=" ".join((model.__doc__ or "").split()), fn=_execute(name),
                      args_model=args_model, timeout=90.0, cost=0.2, quality=1.0, ctx_param="ctx", tags=("gui",)))


_register()

"""Robot actions as tools, executed by the episode's robot sandbox (sandboxes/robot.py's protocol).

    move_ee(position, yaw=0)   the gripper, pointing down, along a straight line to `position` (world metres)
    move_joints(q)             the arm's joints to `q` (radians)
    gripper(command)           "open" or "close"
    home()                     back to the start pose, clear of the camera's view

The embodied agent plans its waypoints and calls these; any agent with a JSON-calling policy can call them
too. A tool checks its arguments (three finite numbers for a position, a known command) before anything moves;
what the robot cannot do (out of reach, below the table) comes back as the sandbox's error, named.
"""

from __future__ import annotations

import math
from typing import Literal

from .registry import ToolContext, ToolError, ToolResult, tool


def _robot(ctx: ToolContext, name: str):
    box = ctx.sandbox
    if box is None or not callable(getattr(box, "act", None)) or not callable(getattr(box, "reset", None)):
        raise ToolError(f"{name}: this episode has no robot sandbox (use sandbox: robot)")
    return box


def _act(ctx: ToolContext, name: str, args: dict) -> ToolResult:
    from ..sandboxes.base import SandboxError

    box = _robot(ctx, name)
    deadline = ctx.deadline  # a motion stops where the arm is once the step's time is up
    try:
        return ToolResult(content=box.act(name, args, deadline=deadline) or f"{name} done",
                          data={"action": name, **args})
    except SandboxError as err:
        raise ToolError(f"{name}: {err}") from None


def _finite(name: str, values: list[float], n: int | None = None) -> list[float]:
    if n is not None and len(values) != n:
        raise ToolError(f"{name}: expected {n} numbers, got {len(values)}")
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise ToolError(f"{name}: {bad[0]!r} is not a finite number")
    return [float(v) for v in values]


@tool(timeout=120.0, cost=1.0, tags=("robot",))
def move_ee(position: list[float], ctx: ToolContext, yaw: float = 0.0) -> ToolResult:
    """Move the gripper, pointing straight down, along a straight line to a point.

    Args:
        position: [x, y, z] of the grasp point between the fingertips, world metres (z up, table at z = 0)
        yaw: rotation of the gripper about the vertical axis, radians
    """
    return _act(ctx, "move_ee", {"position": _finite("move_ee position", position, 3),
                                 "yaw": _finite("move_ee yaw", [yaw])[0]})


@tool(timeout=120.0, cost=1.0, tags=("robot",))
def move_joints(q: list[float], ctx: ToolContext) -> ToolResult:
    """Move the arm's joints to the given positions.

    Args:
        q: one position per arm joint, radians
    """
    return _act(ctx, "move_joints", {"q": _finite("move_joints q", q)})


@tool(timeout=60.0, cost=0.5, tags=("robot",))
def gripper(command: Literal["open", "close"], ctx: ToolContext) -> ToolResult:
    """Open or close the gripper; closing says what it holds.

    Args:
        command: "open" or "close"
    """
    return _act(ctx, "gripper", {"command": command})


@tool(timeout=120.0, cost=1.0, tags=("robot",))
def home(ctx: ToolContext) -> ToolResult:
    """Move the arm back to its start pose, clear of the camera's view of the table."""
    return _act(ctx, "home", {})


ROBOT_TOOLS = ["move_ee", "move_joints", "gripper", "home"]

"""The robot protocol: what a robot sandbox or a real robot driver implements.

The protocol (what a real robot driver implements, `Robot` below)
-----------------------------------------------------------------
Frames and units: metres and radians; the world frame has z up, the robot's base at the origin and the table
top at z = 0. Objects are placed in x ∈ [0.35, 0.70], y ∈ [-0.25, 0.25].

`reset(seed=None) -> RobotObservation` puts the scene back to its start (a simulator draws it from the seed; a
real cell asks its operator) with the arm at home; `observe() -> RobotObservation` looks without moving:
  rgb            HxWx3 uint8 from one FIXED camera that sees the whole workspace (the arm at home hides nothing)
  depth          HxW float32, metres: the camera-frame Z of the surface seen at each pixel (not the ray length);
                 0 where there is no reading
  intrinsics     3x3 K (OpenCV): u = fx·X/Z + cx, v = fy·Y/Z + cy; pixel i's centre at i
  extrinsics     4x4 E, world → camera (x_cam = E · x_world), OpenCV axes (x right, y down, z forward)
  joints         the 7 arm joint positions, radians
  gripper_width  metres between the fingers
  ee_position    the end effector (the grasp point between the fingertips) in the world frame
  ee_orientation its quaternion (x, y, z, w) in the world frame
  png() / depth_png()  the rgb as PNG; the depth as a 16-bit PNG in millimetres (0 = no reading)

`act(action, args, deadline=None) -> str` does one thing and returns a short account of what happened; what it
cannot do is a `SandboxError` naming the action and why (nothing has moved when a target is refused). With a
`deadline` (time.monotonic(), toolpath/deadline.py) a motion stops where the arm is once it passes, holds there,
and says so ("stopped after 12 of 40 waypoints: the run's time budget … ran out"):
  "move_ee"     {"position": [x, y, z], "yaw": 0.0}: the gripper pointing straight down, turned `yaw` radians
                about world z (at yaw 0 the fingers close along world y; the gripper is symmetric under a half
                turn, so yaw is taken modulo π). The end effector moves along a straight line from where it is
                (IK every ~1 cm). Refused: a target out of reach (IK residual over 1 cm, at the target or on the
                way), below z = 0.01 (the fingertips reach 7 mm below the grasp point), a bad argument.
                Returns e.g. "moved to (0.500, 0.100, 0.150), 1.2 mm off; contacts: hand–blue plate" (contacts:
                an arm link or a finger touching the table or an object that is not the held one), or "stopped
                at (…), 23.0 mm short of (…)" when something blocked it.
  "move_joints" {"q": [7 floats]}: a joint-space motion; refused outside the joint limits.
  "gripper"     {"command": "open" | "close"}: "opened (width 80 mm)", "closed: holding red cube (width 44 mm)"
                or "closed on nothing (width 0 mm)".
  "home"        {}: the arm back to its start pose (behind the workspace, out of the camera's way); the gripper
                is left as it is.

The simulated tabletop that implements it (sandbox kind "robot") is sandboxes/robot_sim.py.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .base import Sandbox, SandboxError


@dataclass
class RobotObservation:
    rgb: np.ndarray  # HxWx3 uint8
    depth: np.ndarray  # HxW float32 metres (camera Z), 0 = no reading
    intrinsics: np.ndarray  # 3x3 K
    extrinsics: np.ndarray  # 4x4 world → camera
    joints: list[float]  # arm joint positions, radians
    gripper_width: float  # metres between the fingers
    ee_position: list[float]  # grasp point between the fingertips, world, metres
    ee_orientation: list[float]  # quaternion x, y, z, w

    def png(self) -> bytes:
        from PIL import Image

        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(self.rgb, dtype=np.uint8)).save(buf, format="PNG")
        return buf.getvalue()

    def depth_png(self) -> bytes:
        from PIL import Image

        mm = np.clip(np.round(np.nan_to_num(self.depth, nan=0.0, posinf=0.0) * 1000.0), 0, 65535).astype(np.uint16)
        buf = io.BytesIO()
        Image.fromarray(mm).save(buf, format="PNG")
        return buf.getvalue()


class Robot(Sandbox, Protocol):
    """What a real robot driver implements (see the module docstring for units, frames and errors)."""

    def reset(self, seed: int | None = None) -> RobotObservation: ...

    def observe(self) -> RobotObservation: ...

    def act(self, action: str, args: dict, deadline: float | None = None) -> str: ...


ACTIONS = ("move_ee", "move_joints", "gripper", "home")


# ---- checking an action's arguments, for any implementation ---------------------------------------------


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_args(action: str, args: dict, required: set, optional: set) -> dict:
    """`args` when it holds every required name and nothing beyond the optional ones, else a SandboxError."""
    missing = sorted(required - set(args))
    extra = sorted(set(args) - required - optional)
    if missing or extra:
        want = ", ".join(sorted(required | optional)) or "no arguments"
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(extra)}"] if extra else [])
        raise SandboxError(f"{action}: expected {want}; " + "; ".join(problems))
    return args

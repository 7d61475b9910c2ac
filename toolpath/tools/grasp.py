"""From two image points to a robot motion: the grasp pose, the place height and a collision-aware path.

The embodied agent lifts its pick and place points into the world with the camera's depth (tools.spatial.lift)
and hands them here with the scene's point cloud (world metres, z up, table at z = 0):

    grasp = plan_grasp(cloud, pick_xyz)          top of the object near the point, its centre and yaw
    place = plan_place(cloud, place_xyz, grasp)  the surface under the place point; where to let go
    path  = pick_place_path(cloud, grasp, place) open, above, down, close, up, over, down, open, up, home

The path is collision-aware by construction: the arm travels between the two points at a clearance height
above the highest thing the cloud shows in the corridor between them, plus the held object's height and a
margin, and it descends and rises vertically. Everything is numpy; no simulator is assumed, so a real
robot's depth camera works the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRASP_DEPTH = 0.02  # how far below an object's top the fingertips close (the Panda's pads are ~2 cm long)
MIN_CLEARANCE = 0.15  # travel height floor (m): well above the tabletop objects this agent handles
MAX_CLEARANCE = 0.40  # beyond this the arm's reach shrinks fast
MARGIN = 0.05  # extra height over the highest point in the corridor
DROP = 0.01  # let go this far above the surface: the object settles instead of being pressed into it


class GraspError(ValueError):
    """The cloud near a point cannot support the step (nothing there, no surface): the message says which."""


@dataclass
class Grasp:
    position: list[float]  # where the fingertips close, world metres
    yaw: float  # gripper rotation about z, radians, in [-pi/4, pi/4) (a box's faces repeat every 90°)
    top: float  # the object's top z
    ground: float  # the surface it stands on (z)
    width: float  # its extent across the fingers (m), from the top face

    @property
    def height(self) -> float:
        return self.top - self.ground


@dataclass
class Place:
    position: list[float]  # where the fingertips open, world metres
    surface: float  # z of what the object is put on


def _near(cloud: np.ndarray, xy, radius: float) -> np.ndarray:
    d = np.hypot(cloud[:, 0] - xy[0], cloud[:, 1] - xy[1])
    return cloud[d <= radius]


def _yaw_and_width(face: np.ndarray) -> tuple[float, float]:
    """The rotation (mod 90°) whose axis-aligned box around the face's points is smallest, and that box's
    smaller side: a rotated square's top face is tightest in its own frame."""
    xy = face[:, :2] - face[:, :2].mean(axis=0)
    best = (np.inf, 0.0, 0.0)
    for a in np.radians(np.arange(-45.0, 45.0, 1.5)):
        c, s = np.cos(a), np.sin(a)
        u = xy @ np.array([[c, -s], [s, c]])  # the points in a frame turned by a
        ext = np.ptp(u, axis=0)
        area = ext[0] * ext[1]
        if area < best[0]:
            best = (area, float(a), float(min(ext)))
    return best[1], best[2]


def plan_grasp(cloud: np.ndarray, pick_xyz, radius: float = 0.035, depth: float = GRASP_DEPTH) -> Grasp:
    """A top-down grasp of the object whose surface the pick point lies on.

    The object is what rises above the local ground within `radius` of the point; its top face (points within
    6 mm of its top) gives the centre and the yaw, so a pick point on an edge or a side face still grasps the
    middle."""
    pick = np.asarray(pick_xyz, dtype=float)
    local = _near(cloud, pick[:2], radius)
    ring = _near(cloud, pick[:2], radius + 0.05)
    if len(local) < 10:
        raise GraspError(f"no depth readings within {radius * 100:.1f} cm of the pick point "
                         f"({pick[0]:.3f}, {pick[1]:.3f}, {pick[2]:.3f})")
    ground = float(np.percentile(ring[:, 2], 5))
    top = float(np.percentile(local[:, 2], 97))
    if top - ground < 0.01:
        raise GraspError(f"nothing stands out near the pick point ({pick[0]:.3f}, {pick[1]:.3f}): the surface there "
                         f"is flat (top {top:.3f} m, ground {ground:.3f} m)")
    # The top face (points within 6 mm of the top) around the point; its centre is the middle of its extent.
    # A point near an edge sees only part of the face at first, so the window re-centres on the face twice.
    centre = pick[:2]
    for _ in range(3):
        near = _near(cloud, centre, radius)
        face = near[near[:, 2] >= top - 0.006]
        if len(face) < 10:
            break
        centre = (face[:, :2].min(axis=0) + face[:, :2].max(axis=0)) / 2
    yaw, width = _yaw_and_width(face) if len(face) >= 10 else (0.0, 0.0)
    z = max(top - min(depth, 0.5 * (top - ground)), ground + 0.005)
    return Grasp(position=[float(centre[0]), float(centre[1]), float(z)], yaw=yaw, top=top, ground=ground,
                 width=width)


def plan_place(cloud: np.ndarray, place_xyz, grasp: Grasp, radius: float = 0.02) -> Place:
    """Where to open the gripper so the held object's bottom comes to rest just above the surface there."""
    place = np.asarray(place_xyz, dtype=float)
    local = _near(cloud, place[:2], radius)
    if len(local) < 5:
        raise GraspError(f"no depth readings within {radius * 100:.1f} cm of the place point "
                         f"({place[0]:.3f}, {place[1]:.3f}, {place[2]:.3f})")
    surface = float(np.median(local[:, 2]))
    # the fingertips hold the object this far above its bottom
    hold = grasp.position[2] - grasp.ground
    return Place(position=[float(place[0]), float(place[1]), surface + hold + DROP], surface=surface)


def clearance_height(cloud: np.ndarray, a_xy, b_xy, held: float, width: float = 0.06) -> float:
    """Travel height between two points: over the highest point in the corridor (half-width `width`) plus the
    held object's height and a margin, within [MIN_CLEARANCE, MAX_CLEARANCE]."""
    a, b = np.asarray(a_xy, dtype=float)[:2], np.asarray(b_xy, dtype=float)[:2]
    ab = b - a
    t = np.clip(((cloud[:, :2] - a) @ ab) / max(float(ab @ ab), 1e-9), 0.0, 1.0)
    d = np.linalg.norm(cloud[:, :2] - (a + t[:, None] * ab), axis=1)
    corridor = cloud[d <= width, 2]
    # what stands higher than any travel height could clear is not on the table (the arm itself, seen at home)
    corridor = corridor[corridor < MAX_CLEARANCE - held - MARGIN]
    highest = float(corridor.max()) if corridor.size else 0.0
    return float(np.clip(highest + held + MARGIN, MIN_CLEARANCE, MAX_CLEARANCE))


def pick_place_path(cloud: np.ndarray, grasp: Grasp, place: Place) -> list[tuple[str, dict]]:
    """The tool calls (tools/robot.py) that pick at `grasp` and let go at `place`, in order."""
    up = round(clearance_height(cloud, grasp.position, place.position, grasp.height), 4)
    gx, gy, gz = (round(v, 4) for v in grasp.position)  # a tenth of a millimetre is finer than any arm
    px, py, pz = (round(v, 4) for v in place.position)
    yaw = round(grasp.yaw, 4)
    return [("gripper", {"command": "open"}),
            ("move_ee", {"position": [gx, gy, up], "yaw": yaw}),
            ("move_ee", {"position": [gx, gy, gz], "yaw": yaw}),
            ("gripper", {"command": "close"}),
            ("move_ee", {"position": [gx, gy, up], "yaw": yaw}),
            ("move_ee", {"position": [px, py, up], "yaw": yaw}),
            ("move_ee", {"position": [px, py, pz], "yaw": yaw}),
            ("gripper", {"command": "open"}),
            ("move_ee", {"position": [px, py, up], "yaw": yaw}),
            ("home", {})]

"""tools/grasp.py on synthetic point clouds with known objects: grasp pose, place height, clearance, the path."""

from __future__ import annotations

import math

import numpy as np
import pytest

from toolpath.tools.grasp import (
    MAX_CLEARANCE,
    MIN_CLEARANCE,
    GraspError,
    clearance_height,
    pick_place_path,
    plan_grasp,
    plan_place,
)


def table(step=0.004, x=(0.2, 0.9), y=(-0.4, 0.4)) -> np.ndarray:
    xs, ys = np.meshgrid(np.arange(*x, step), np.arange(*y, step))
    return np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], axis=1)


def box_top(centre, size, yaw=0.0, base=0.0, step=0.003) -> np.ndarray:
    """The points a camera above sees of a box: its top face (yawed), at base + height."""
    sx, sy, sz = size
    u, v = np.meshgrid(np.arange(-sx / 2, sx / 2 + 1e-9, step), np.arange(-sy / 2, sy / 2 + 1e-9, step))
    c, s = math.cos(yaw), math.sin(yaw)
    x = centre[0] + c * u.ravel() - s * v.ravel()
    y = centre[1] + s * u.ravel() + c * v.ravel()
    return np.stack([x, y, np.full(x.size, base + sz)], axis=1)


def scene(*parts) -> np.ndarray:
    cloud = table()
    for p in parts:
        # the table is hidden under what stands on it (its footprint, to within the box's bounds)
        lo, hi = p[:, :2].min(axis=0), p[:, :2].max(axis=0)
        cloud = cloud[~((cloud[:, :2] >= lo).all(axis=1) & (cloud[:, :2] <= hi).all(axis=1))]
    return np.concatenate([cloud, *parts])


def test_grasp_finds_the_cube_centre_its_yaw_and_height_from_a_point_on_its_edge():
    cube = box_top((0.5, 0.1), (0.045, 0.045, 0.045), yaw=math.radians(30))
    g = plan_grasp(scene(cube), (0.515, 0.105, 0.045))  # off centre, near an edge
    assert g.position[0] == pytest.approx(0.5, abs=0.004) and g.position[1] == pytest.approx(0.1, abs=0.004)
    assert g.top == pytest.approx(0.045, abs=0.002) and g.ground == pytest.approx(0.0, abs=0.002)
    assert g.position[2] == pytest.approx(0.025, abs=0.003)  # 2 cm below the top
    assert math.degrees(g.yaw) % 90 == pytest.approx(30, abs=3)
    assert g.width == pytest.approx(0.045, abs=0.006)


def test_grasp_on_a_flat_surface_or_nowhere_is_an_error_naming_the_point():
    with pytest.raises(GraspError, match="flat"):
        plan_grasp(table(), (0.5, 0.0, 0.0))
    with pytest.raises(GraspError, match=r"no depth readings.*\(2\.000, 2\.000"):
        plan_grasp(table(), (2.0, 2.0, 0.0))


def test_place_lets_go_just_above_the_plate_whatever_the_grasp_height():
    cube = box_top((0.5, 0.1), (0.045, 0.045, 0.045))
    plate = box_top((0.55, -0.15), (0.14, 0.14, 0.012))
    cloud = scene(cube, plate)
    g = plan_grasp(cloud, (0.5, 0.1, 0.045))
    p = plan_place(cloud, (0.55, -0.15, 0.012), g)
    assert p.surface == pytest.approx(0.012, abs=0.001)
    bottom_at_release = p.position[2] - (g.position[2] - g.ground)
    assert bottom_at_release == pytest.approx(0.012 + 0.01, abs=0.002)


def test_clearance_clears_the_tallest_thing_in_the_corridor_only():
    tower = box_top((0.55, 0.0), (0.04, 0.04, 0.25))
    beside = box_top((0.55, 0.3), (0.04, 0.04, 0.30))  # tall, but 30 cm off the path
    cloud = scene(tower, beside)
    h = clearance_height(cloud, (0.45, -0.1), (0.65, 0.1), held=0.045)
    assert h == pytest.approx(0.25 + 0.045 + 0.05, abs=0.002)
    assert clearance_height(table(), (0.45, -0.1), (0.65, 0.1), held=0.045) == MIN_CLEARANCE
    tall = scene(box_top((0.55, 0.0), (0.04, 0.04, 0.6)))
    assert clearance_height(tall, (0.45, 0), (0.65, 0), 0.045) <= MAX_CLEARANCE


def test_path_descends_and_rises_vertically_and_travels_at_the_clearance():
    cube = box_top((0.5, 0.1), (0.045, 0.045, 0.045))
    plate = box_top((0.55, -0.15), (0.14, 0.14, 0.012))
    cloud = scene(cube, plate)
    g = plan_grasp(cloud, (0.5, 0.1, 0.045))
    path = pick_place_path(cloud, g, plan_place(cloud, (0.55, -0.15, 0.012), g))
    names = [n for n, _ in path]
    assert names == ["gripper", "move_ee", "move_ee", "gripper", "move_ee", "move_ee", "move_ee", "gripper",
                     "move_ee", "home"]
    assert path[0][1] == {"command": "open"} and path[3][1] == {"command": "close"}
    assert path[7][1] == {"command": "open"}
    moves = [a["position"] for n, a in path if n == "move_ee"]
    up = moves[0][2]
    assert up >= MIN_CLEARANCE
    assert moves[0][:2] == moves[1][:2] == moves[2][:2]  # down to the cube and back up, straight
    assert moves[3][:2] == moves[4][:2] == moves[5][:2]  # over the plate, down, up
    assert moves[2][2] == moves[3][2] == moves[5][2] == up

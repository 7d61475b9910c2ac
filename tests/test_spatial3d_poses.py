"""Pose algebra on world→camera extrinsics (OpenCV axes), checked against geometry worked out by hand."""

import math

import numpy as np
import pytest

from toolpath.tools.spatial3d.poses import (
    camera_center,
    describe_camera_motion,
    move_backward,
    move_forward,
    relative_pose,
    rotate_left,
    rotate_right,
    turn_around,
    yaw_between,
)
from toolpath.tools.spatial3d.scene import Reconstruction


def pose(yaw_deg=0.0, center=(0.0, 0.0, 0.0)):
    """A camera at `center` turned left by yaw_deg from looking along world +z (world axes = OpenCV's)."""
    a = math.radians(yaw_deg)
    forward = np.array([-math.sin(a), 0.0, math.cos(a)])
    right = np.array([math.cos(a), 0.0, math.sin(a)])
    down = np.array([0.0, 1.0, 0.0])
    R = np.stack([right, down, forward])  # rows: camera axes in world coordinates
    E = np.eye(4)
    E[:3, :3] = R
    E[:3, 3] = -R @ np.asarray(center, dtype=float)
    return E


def forward_of(E):
    return E[:3, :3].T @ np.array([0.0, 0.0, 1.0])


def test_camera_center_is_minus_r_transpose_t():
    E = pose(30, (1.0, 2.0, 3.0))
    assert np.allclose(camera_center(E), [1, 2, 3])


def test_moving_forward_follows_the_cameras_own_view_even_when_it_is_turned():
    E = pose(90, (0.0, 0.0, 0.0))  # looking along world -x
    moved = move_forward(E, 2.0)
    assert np.allclose(camera_center(moved), [-2, 0, 0])
    assert np.allclose(moved[:3, :3], E[:3, :3])  # moving does not turn
    # pySpatial's t - d*R[:,2] would move it elsewhere unless R is the identity
    wrong = E.copy()
    wrong[:3, 3] = E[:3, 3] - 2.0 * E[:3, 2]
    assert not np.allclose(camera_center(wrong), [-2, 0, 0])
    assert np.allclose(camera_center(move_backward(moved, 2.0)), [0, 0, 0])


def test_turning_is_about_the_cameras_own_up_axis():
    E = pose(0, (5.0, 0.0, 1.0))
    left = rotate_left(E, 90)
    assert np.allclose(forward_of(left), [-1, 0, 0])  # looking left now (world -x)
    assert np.allclose(camera_center(left), [5, 0, 1])  # turning in place keeps the position
    assert np.allclose(forward_of(rotate_right(E, 90)), [1, 0, 0])
    assert np.allclose(forward_of(turn_around(E)), [0, 0, -1])
    # from an already turned pose, turning left again adds up
    assert np.allclose(forward_of(rotate_left(pose(45), 45)), [-1, 0, 0])
    assert yaw_between(E, left) == pytest.approx(90)
    assert yaw_between(E, rotate_right(E, 30)) == pytest.approx(-30)


def test_relative_pose_maps_camera_one_coordinates_to_camera_two():
    E1, E2 = pose(20, (1, 0, 0)), pose(-40, (0, 0, 3))
    X = np.array([0.3, -0.2, 5.0, 1.0])
    assert np.allclose(relative_pose(E1, E2) @ (E1 @ X), E2 @ X)


@pytest.mark.parametrize("center, expected", [
    ((0, 0, 1), "moved forward"), ((1, 0, 1), "moved forward-right"), ((1, 0, 0), "moved right"),
    ((1, 0, -1), "moved backward-right"), ((0, 0, -1), "moved backward"), ((-1, 0, -1), "moved backward-left"),
    ((-1, 0, 0), "moved left"), ((-1, 0, 1), "moved forward-left"), ((0.01, 0, 0), "no significant movement"),
])
def test_eight_direction_bins_in_the_first_cameras_frame(center, expected):
    E = np.stack([pose(0), pose(0, center)])
    assert expected in describe_camera_motion(E)


def test_directions_are_relative_to_the_first_camera_not_the_world():
    first = pose(90)  # turned left to look along world -x: its right is now world +z (where it looked before)
    second = pose(90, (0, 0, 1))
    recon = Reconstruction(points=np.zeros((0, 3)), extrinsics=np.stack([first, second]),
                           intrinsics=np.stack([np.eye(3)] * 2))
    text = describe_camera_motion(recon)
    assert "moved right" in text and "no significant turn" in text
    turned = np.stack([pose(0), rotate_left(pose(0), 90)])
    assert "turned left by about 90°" in describe_camera_motion(turned)


def test_a_pose_that_was_not_recovered_is_an_error_not_a_guess():
    E = np.stack([pose(0), np.full((4, 4), np.nan)])
    with pytest.raises(ValueError, match="not recovered"):
        describe_camera_motion(E)
    with pytest.raises(ValueError, match="4x4"):
        move_forward(np.eye(3), 1.0)

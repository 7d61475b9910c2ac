"""Camera pose algebra on world→camera extrinsics E = [R t; 0 1] (OpenCV: x right, y down, z forward).

Moving the camera by d along its own viewing direction changes only t: a world point's camera coordinates
lose d along z, so t' = t − d·e_z (pySpatial writes t − d·R[:,2], which is that only when R ≈ I). Turning
rotates the camera about its own up axis (−y in OpenCV): a body rotation Q, expressed in the old camera's
frame, gives E' = diag(Qᵀ, 1) · E (pySpatial rotates about an axis averaged over the scene, which again is
right only when R ≈ I). The camera centre is C = −Rᵀt.
"""

from __future__ import annotations

import math

import numpy as np

DIRECTIONS = ("forward", "forward-right", "right", "backward-right", "backward", "backward-left", "left",
              "forward-left")  # pySpatial's eight 45° bins, clockwise from straight ahead seen from above


def _check(E) -> np.ndarray:
    E = np.asarray(E, dtype=np.float64)
    if E.shape != (4, 4):
        raise ValueError(f"expected a 4x4 world-to-camera matrix, got shape {E.shape}")
    if not np.isfinite(E).all():
        raise ValueError("this camera pose was not recovered (its extrinsics are NaN)")
    return E


def camera_center(E) -> np.ndarray:
    """The camera's position in world coordinates, C = −Rᵀt."""
    E = _check(E)
    return -E[:3, :3].T @ E[:3, 3]


def yaw_matrix(angle_deg: float) -> np.ndarray:
    """The body rotation that turns a camera left by `angle_deg` about its own up axis (−y)."""
    a = math.radians(angle_deg)
    c, s = math.cos(a), math.sin(a)
    # Rotation by +a about −y (= by −a about +y): forward (z) goes to −x, i.e. to the left.
    return np.array([[c, 0.0, -s], [0.0, 1.0, 0.0], [s, 0.0, c]])


def _turn(E, angle_deg: float) -> np.ndarray:
    E = _check(E)
    Q = np.eye(4)
    Q[:3, :3] = yaw_matrix(angle_deg).T
    return Q @ E


def rotate_left(E, angle: float = 90.0) -> np.ndarray:
    """The pose after turning left by `angle` degrees in place."""
    return _turn(E, angle)


def rotate_right(E, angle: float = 90.0) -> np.ndarray:
    """The pose after turning right by `angle` degrees in place."""
    return _turn(E, -angle)


def turn_around(E) -> np.ndarray:
    """The pose after turning 180° in place."""
    return _turn(E, 180.0)


def move_forward(E, d: float) -> np.ndarray:
    """The pose after moving `d` (scene units) along the camera's own viewing direction."""
    E = _check(E).copy()
    E[2, 3] -= d
    return E


def move_backward(E, d: float) -> np.ndarray:
    return move_forward(E, -d)


def relative_pose(E1, E2) -> np.ndarray:
    """Camera 2's pose in camera 1's frame: the 4x4 mapping camera-1 coordinates to camera-2 coordinates."""
    return _check(E2) @ np.linalg.inv(_check(E1))


def yaw_between(E1, E2) -> float:
    """How far camera 2 is turned from camera 1 about camera 1's up axis, in degrees; positive = to the left."""
    R = relative_pose(E1, E2)[:3, :3]
    f = R.T @ np.array([0.0, 0.0, 1.0])  # camera 2's forward axis in camera 1's frame
    return math.degrees(math.atan2(-f[0], f[2]))


def describe_camera_motion(recon, i: int = 0, j: int = 1, threshold: float = 0.05) -> str:
    """How camera j moved and turned relative to camera i, in words.

    The translation C_j − C_i is expressed in camera i's frame and put in one of eight 45° bins on the ground
    plane (x right, z forward); below `threshold` (a fraction of the scene's extent, or absolute units when
    the reconstruction has no points) it is "no significant movement". The turn is the yaw between them."""
    Es = recon.extrinsics if hasattr(recon, "extrinsics") else np.asarray(recon)
    Ei, Ej = _check(Es[i]), _check(Es[j])
    delta = Ei[:3, :3] @ (camera_center(Ej) - camera_center(Ei))  # in camera i's axes
    scale = _scene_scale(recon)
    planar = math.hypot(delta[0], delta[2])
    if planar < threshold * scale:
        move = "no significant movement"
    else:
        angle = math.degrees(math.atan2(delta[0], delta[2])) % 360.0  # 0 = forward, 90 = right
        move = f"moved {DIRECTIONS[int(((angle + 22.5) % 360.0) // 45.0)]}"
    yaw = yaw_between(Ei, Ej)
    turn = ("no significant turn" if abs(yaw) < 15
            else f"turned {'left' if yaw > 0 else 'right'} by about {abs(yaw):.0f}°")
    return f"camera {j + 1} relative to camera {i + 1}: {move}, {turn}"


def _scene_scale(recon) -> float:
    """A length the movement threshold is relative to: the spread of the points, else of the cameras, else 1."""
    pts = getattr(recon, "points", None)
    if pts is not None and len(pts) >= 10:
        xyz = np.asarray(pts)[:, :3]
        xyz = xyz[np.isfinite(xyz).all(axis=1)]
        if len(xyz) >= 10:
            lo, hi = np.percentile(xyz, [5, 95], axis=0)
            return float(np.linalg.norm(hi - lo)) or 1.0
    return 1.0

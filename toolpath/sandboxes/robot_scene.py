"""Pure helpers for the tabletop robot sandbox (sandboxes/robot_sim.py): no pybullet here, numpy only.

- the scene's vocabulary: object kinds and sizes, colours, parsing the `objects` option, seeded placement;
- the fixed camera: where it is, and its intrinsics K / extrinsics E in the OpenCV conventions of
  tools/spatial3d (E maps world → camera; x right, y down, z forward; pixel i's centre at i);
- the arm's kinematics: forward kinematics read from the URDF itself (so it cannot drift from what pybullet
  simulates) and a damped-least-squares IK for "gripper straight down, rotated by yaw" targets.

Kept apart from the simulator (robot_sim.py) so the geometry can be tested and reused (by a real-robot driver,
by the oracle) without a physics engine.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

# ----------------------------------------------------------------- vocabulary

WORKSPACE_X = (0.35, 0.70)  # where objects are placed (their whole footprint), metres, world frame
WORKSPACE_Y = (-0.25, 0.25)
CUBE_EDGE = 0.045
PLATE_RADIUS = 0.07
PLATE_HEIGHT = 0.012
KINDS = ("cube", "plate")
MASS = {"cube": 0.08, "plate": 0.10}  # kg: light enough for the Panda's fingers, heavy enough not to jitter
COLORS = {"red": (0.85, 0.12, 0.12, 1.0), "green": (0.15, 0.65, 0.20, 1.0), "blue": (0.15, 0.30, 0.85, 1.0),
          "yellow": (0.95, 0.85, 0.15, 1.0), "purple": (0.55, 0.25, 0.75, 1.0), "orange": (1.00, 0.50, 0.05, 1.0)}
TABLE_RGBA = (0.55, 0.55, 0.55, 1.0)
FLOOR_RGBA = (0.25, 0.25, 0.27, 1.0)


def size_of(kind: str) -> list[float]:
    """Full extents [sx, sy, sz] in the object's own frame, metres."""
    if kind == "cube":
        return [CUBE_EDGE] * 3
    return [2 * PLATE_RADIUS, 2 * PLATE_RADIUS, PLATE_HEIGHT]


def radius_of(kind: str) -> float:
    """Radius of the circle that holds the object's footprint whatever its yaw."""
    return CUBE_EDGE / math.sqrt(2) if kind == "cube" else PLATE_RADIUS


def parse_objects(objects, rng: np.random.Generator) -> list[tuple[str, str]]:
    """(color, kind) per object. `objects`: None (from rng: 2 cubes and 2 plates of distinct colours), or a list of
    "red cube" strings or {"kind", "color"} dicts. Errors name the entry and what was expected."""
    if objects is None:
        colors = [str(c) for c in rng.permutation(list(COLORS))[:4]]
        return [(colors[0], "cube"), (colors[1], "cube"), (colors[2], "plate"), (colors[3], "plate")]
    if isinstance(objects, str) or not isinstance(objects, (list, tuple)):
        raise ValueError(f"objects: expected a list of 'color kind' strings or {{kind, color}} dicts, got {objects!r}")
    if not 1 <= len(objects) <= 8:
        raise ValueError(f"objects: expected 1 to 8 objects, got {len(objects)}")
    out = []
    for i, obj in enumerate(objects):
        if isinstance(obj, str):
            words = obj.lower().split()
            if len(words) != 2:
                raise ValueError(f"objects[{i}]: expected 'color kind' such as 'red cube', got {obj!r}")
            color, kind = words
        elif isinstance(obj, dict):
            extra = sorted(set(obj) - {"kind", "color"})
            if extra or "kind" not in obj or "color" not in obj:
                raise ValueError(f"objects[{i}]: expected keys kind and color, got {sorted(obj)}")
            color, kind = str(obj["color"]).lower(), str(obj["kind"]).lower()
        else:
            raise ValueError(f"objects[{i}]: expected a string or a dict, got {type(obj).__name__}")
        if kind not in KINDS:
            raise ValueError(f"objects[{i}]: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        if color not in COLORS:
            raise ValueError(f"objects[{i}]: unknown color {color!r}; expected one of {', '.join(COLORS)}")
        if (color, kind) in out:
            raise ValueError(f"objects[{i}]: {color} {kind} is listed twice (names must be unique)")
        out.append((color, kind))
    return out


def place_objects(kinds: list[str], rng: np.random.Generator, tries: int = 2000) -> list[tuple[float, float, float]]:
    """(x, y, yaw) per object: footprints inside the workspace, apart enough for the open gripper's fingers to go
    down beside a cube without touching a neighbour. Plates first (the big ones are the hard part)."""
    order = sorted(range(len(kinds)), key=lambda i: kinds[i] != "plate")
    for _ in range(20):  # restart the whole draw if one object finds no room
        placed: dict[int, tuple[float, float, float]] = {}
        for i in order:
            r = radius_of(kinds[i])
            for _ in range(tries):
                x = rng.uniform(WORKSPACE_X[0] + r, WORKSPACE_X[1] - r)
                y = rng.uniform(WORKSPACE_Y[0] + r, WORKSPACE_Y[1] - r)
                ok = True
                for j, (xj, yj, _) in placed.items():
                    # 4 cm between footprints next to a cube (fingers 8 cm apart round a 4.5 cm cube), 2 between plates
                    gap = 0.02 if kinds[i] == kinds[j] == "plate" else 0.04
                    if math.hypot(x - xj, y - yj) < r + radius_of(kinds[j]) + gap:
                        ok = False
                        break
                if ok:
                    placed[i] = (float(x), float(y), float(rng.uniform(-math.pi, math.pi)))
                    break
            else:
                break
        if len(placed) == len(kinds):
            return [placed[i] for i in range(len(kinds))]
    raise ValueError(f"objects: no room for {len(kinds)} objects ({', '.join(kinds)}) in the workspace")


def parse_image(image) -> tuple[int, int]:
    """(width, height) from "640x480", [640, 480] or (640, 480)."""
    if isinstance(image, str):
        parts = image.lower().replace(" ", "").split("x")
        try:
            w, h = (int(v) for v in parts)
        except ValueError:
            raise ValueError(f"image: expected 'WIDTHxHEIGHT' such as '640x480', got {image!r}") from None
    elif isinstance(image, (list, tuple)) and len(image) == 2 and all(isinstance(v, int) for v in image):
        w, h = image
    else:
        raise ValueError(f"image: expected 'WIDTHxHEIGHT' such as '640x480' or [width, height], got {image!r}")
    if not (64 <= w <= 2048 and 64 <= h <= 2048):
        raise ValueError(f"image: {w}x{h} is outside 64..2048 pixels a side")
    return w, h


def half_height(kind: str, R: np.ndarray) -> float:
    """Half the vertical extent of an object turned by R (exact for its shape; AABBs carry collision margins)."""
    if kind == "cube":
        return float(abs(R[2, :]).sum() * CUBE_EDGE / 2)
    tilt = abs(R[2, 2])
    return float(tilt * PLATE_HEIGHT / 2 + math.sqrt(max(0.0, 1 - tilt * tilt)) * PLATE_RADIUS)


def grasp_yaw(cube_yaw: float) -> float:
    """The gripper yaw (|yaw| ≤ 45°) whose fingers close on two opposite faces of a cube turned `cube_yaw`
    (at gripper yaw 0 the fingers close along world y; see down_rotation)."""
    return (cube_yaw + math.pi / 4) % (math.pi / 2) - math.pi / 4


# ----------------------------------------------------------------- camera

# In front of the robot, looking back at it and down at the workspace: the arm at home is behind every object
# as the camera sees it, so it never hides one (the tests check this with the segmentation).
CAMERA_EYE = (1.10, 0.0, 0.80)
CAMERA_TARGET = (0.40, 0.0, 0.10)
CAMERA_VFOV = 45.0  # degrees, vertical; pixels are square
NEAR, FAR = 0.05, 4.0


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """World → camera (OpenCV axes: x right, y down, z forward) for a camera at `eye` looking at `target`."""
    eye, target, up = (np.asarray(v, dtype=np.float64) for v in (eye, target, up))
    z = target - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    E = np.eye(4)
    E[:3, :3] = np.stack([x, y, z])
    E[:3, 3] = -E[:3, :3] @ eye
    return E


def intrinsics(width: int, height: int, vfov_deg: float = CAMERA_VFOV) -> np.ndarray:
    """K for a pinhole with square pixels; principal point at the image centre in pixel-centre coordinates."""
    f = (height / 2) / math.tan(math.radians(vfov_deg) / 2)
    return np.array([[f, 0.0, (width - 1) / 2], [0.0, f, (height - 1) / 2], [0.0, 0.0, 1.0]])


def gl_matrices(E: np.ndarray, width: int, height: int, vfov_deg: float = CAMERA_VFOV) -> tuple[list, list]:
    """pybullet's (view, projection) matrices, column-major, for extrinsics E and this image size."""
    V = np.diag([1.0, -1.0, -1.0, 1.0]) @ E  # OpenGL camera: y up, looking along -z
    t = math.tan(math.radians(vfov_deg) / 2)
    a = width / height
    # TinyRenderer samples pixel i at i + 0 (not i + 0.5) of the viewport and flips rows, which puts the
    # principal point at (W/2, H/2 - 1) in pixel-centre coordinates; half a pixel of shear (measured: the table
    # plane back-projects to z = 0 within 1e-6 m) moves it to the ((W-1)/2, (H-1)/2) that intrinsics() says.
    P = np.array([[1 / (a * t), 0, 1.0 / width, 0], [0, 1 / t, 1.0 / height, 0],
                  [0, 0, -(FAR + NEAR) / (FAR - NEAR), -2 * FAR * NEAR / (FAR - NEAR)], [0, 0, -1, 0]])
    return V.T.reshape(-1).tolist(), P.T.reshape(-1).tolist()


def linear_depth(buffer: np.ndarray) -> np.ndarray:
    """OpenGL depth buffer (0..1, non-linear) → camera-frame Z in metres; 0 where nothing was hit (far plane)."""
    d = np.asarray(buffer, dtype=np.float64)
    z = FAR * NEAR / (FAR - (FAR - NEAR) * d)
    z[d >= 1.0 - 1e-7] = 0.0
    return z.astype(np.float32)


def project(K: np.ndarray, E: np.ndarray, points) -> np.ndarray:
    """Nx2 pixel coordinates (u, v) of Nx3 world points."""
    P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    cam = P @ E[:3, :3].T + E[:3, 3]
    uv = cam @ K.T
    return uv[:, :2] / uv[:, 2:3]


# ----------------------------------------------------------------- kinematics


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    C = 1 - c
    return np.array([[c + x * x * C, x * y * C - z * s, x * z * C + y * s],
                     [y * x * C + z * s, c + y * y * C, y * z * C - x * s],
                     [z * x * C - y * s, z * y * C + x * s, c + z * z * C]])


def rotvec(R: np.ndarray) -> np.ndarray:
    """Rotation vector (axis × angle) of a rotation matrix."""
    cos = max(-1.0, min(1.0, (np.trace(R) - 1) / 2))
    angle = math.acos(cos)
    if angle < 1e-9:
        return np.zeros(3)
    if angle > math.pi - 1e-6:  # near a half turn: the axis from the diagonal
        axis = np.sqrt(np.maximum((np.diag(R) + 1) / 2, 0.0))
        i = int(np.argmax(axis))
        axis[(i + 1) % 3] *= 1 if R[i, (i + 1) % 3] >= 0 else -1
        axis[(i + 2) % 3] *= 1 if R[i, (i + 2) % 3] >= 0 else -1
        return axis / np.linalg.norm(axis) * angle
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    return w / (2 * math.sin(angle)) * angle


def rotation(v) -> np.ndarray:
    """The rotation matrix of a rotation vector (the inverse of rotvec)."""
    v = np.asarray(v, dtype=np.float64)
    angle = float(np.linalg.norm(v))
    return np.eye(3) if angle < 1e-12 else _axis_angle(v / angle, angle)


def down_rotation(yaw: float) -> np.ndarray:
    """The gripper pointing straight down (its z along world -z), turned `yaw` about world z.
    At yaw 0 the fingers close along the world y axis."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])  # Rz(yaw) · Rx(pi)


@dataclass
class Chain:
    """A serial chain of revolute joints read from a URDF: base link → tip link (fixed joints folded in)."""

    origins: list[np.ndarray]  # 4x4 per revolute joint: parent frame → joint frame (fixed joints before it folded in)
    axes: list[np.ndarray]
    lower: np.ndarray
    upper: np.ndarray
    tip: np.ndarray  # 4x4: last revolute joint's frame → tip frame

    @classmethod
    def from_urdf(cls, path: str, tip: str, base: str | None = None) -> Chain:
        root = ET.parse(path).getroot()
        by_child = {j.find("child").get("link"): j for j in root.findall("joint")}
        joints, link = [], tip
        while link in by_child and link != base:
            j = by_child[link]
            joints.append(j)
            link = j.find("parent").get("link")
        joints.reverse()
        origins, axes, lower, upper = [], [], [], []
        pending = np.eye(4)
        for j in joints:
            o = j.find("origin")
            T = np.eye(4)
            if o is not None:
                T[:3, :3] = _rpy(*[float(v) for v in o.get("rpy", "0 0 0").split()])
                T[:3, 3] = [float(v) for v in o.get("xyz", "0 0 0").split()]
            pending = pending @ T
            if j.get("type") == "revolute":
                origins.append(pending)
                axes.append(np.array([float(v) for v in j.find("axis").get("xyz").split()]))
                lim = j.find("limit")
                lower.append(float(lim.get("lower")))
                upper.append(float(lim.get("upper")))
                pending = np.eye(4)
            elif j.get("type") != "fixed":
                raise ValueError(f"{path}: joint {j.get('name')} on the way to {tip} is {j.get('type')}, not revolute")
        return cls(origins, axes, np.array(lower), np.array(upper), pending)

    def fk(self, q) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Tip pose (4x4, in the base frame) and each joint's (position, world axis) for the Jacobian."""
        T = np.eye(4)
        joints = []
        for origin, axis, qi in zip(self.origins, self.axes, q):
            T = T @ origin
            joints.append((T[:3, 3].copy(), T[:3, :3] @ axis))
            R = np.eye(4)
            R[:3, :3] = _axis_angle(axis, float(qi))
            T = T @ R
        return T @ self.tip, joints

    def ik(self, q0, position, R_target, rest=None, iters: int = 200, tol: float = 1e-4,
           rot_weight: float = 0.3) -> tuple[np.ndarray, float, float]:
        """Joint angles reaching (position, R_target) from q0 by damped least squares, inside the joint limits,
        pulled towards `rest` in the null space (keeps the elbow up). Returns (q, position error m, angle error rad)."""
        q = np.clip(np.asarray(q0, dtype=np.float64), self.lower, self.upper)
        position = np.asarray(position, dtype=np.float64)
        lo, hi = self.lower + 1e-4, self.upper - 1e-4
        n = len(q)
        for _ in range(iters):
            T, joints = self.fk(q)
            ep = position - T[:3, 3]
            er = rotvec(R_target @ T[:3, :3].T)
            if np.linalg.norm(ep) < tol and np.linalg.norm(er) < 10 * tol:
                break
            J = np.zeros((6, n))
            for i, (p, z) in enumerate(joints):
                J[:3, i] = np.cross(z, T[:3, 3] - p)
                J[3:, i] = z * rot_weight
            e = np.concatenate([ep, er * rot_weight])
            lam = 0.01 + 0.2 * min(1.0, float(np.linalg.norm(e)))  # more damping far away: no wild first steps
            JJt = J @ J.T + lam * lam * np.eye(6)
            dq = J.T @ np.linalg.solve(JJt, e)
            if rest is not None:
                Jp = J.T @ np.linalg.inv(JJt)
                dq += (np.eye(n) - Jp @ J) @ (0.1 * (np.asarray(rest) - q))
            step = np.max(np.abs(dq))
            if step > 0.3:
                dq *= 0.3 / step
            q = np.clip(q + dq, lo, hi)
        T, _ = self.fk(q)
        return q, float(np.linalg.norm(position - T[:3, 3])), float(np.linalg.norm(rotvec(R_target @ T[:3, :3].T)))

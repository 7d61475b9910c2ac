"""The simulated tabletop that implements the robot protocol (sandboxes/robot.py), sandbox kind "robot".

Headless pybullet (its own DIRECT client per sandbox, so two sandboxes never share a world), the Franka Panda
from pybullet_data on a grey table, cubes (4.5 cm, 80 g) and plates (radius 7 cm, 1.2 cm high) named
"<color> <kind>", rendered on the CPU by pybullet's TinyRenderer. Ground truth for the oracle and the success
check, NOT part of the protocol: `objects_truth()`, `segmentation()`, `held()`, `is_on(obj, target)`.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

import numpy as np
from pydantic import Field, StrictInt

from ..deadline import BUDGET_SPENT, passed
from . import robot_scene as S
from .base import SandboxError, SandboxLimits, SandboxOptions, read_by
from .robot import ACTIONS, RobotObservation, check_args, is_number

HOME_Q = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)  # Panda's "ready" pose: hand 0.49 m up at x = 0.31
ARM_JOINTS = tuple(range(7))
FINGERS = (9, 10)  # pybullet link/joint indices of panda_leftfinger, panda_rightfinger
EE_LINK = 11  # panda_grasptarget: between the fingertips, 10.5 cm from the hand
ARM_FORCES = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)  # N·m, the URDF's effort limits
GRIP_FORCE = 40.0  # N per finger: a firm hold on an 80 g cube with friction 1 (0.8 N would do), no crushing
FINGER_OPEN = 0.04  # m per finger
MIN_Z = 0.01  # lowest grasp-point height move_ee accepts
STEP_M = 0.01  # straight-line waypoints every 1 cm
REACH_TOL = 0.01  # IK residual past which a target is out of reach
DT = 1.0 / 240.0


def _connect():
    """(pybullet, a new DIRECT client id), with file descriptor 1 pointed away meanwhile: pybullet's C code
    prints its build time to stdout when it connects, which would corrupt `toolpath run --json`. C's stdio
    buffer is flushed while fd 1 still goes nowhere, so the line is not written at exit either."""
    import ctypes
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            import pybullet

            client = pybullet.connect(pybullet.DIRECT)
            try:
                ctypes.CDLL("libc.so.6").fflush(None)
            except OSError:  # not glibc: the line may then show at exit
                pass
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    return pybullet, client


class _Client:
    """pybullet functions bound to one physics client (pybullet_utils' BulletClient, without its per-call inspect)."""

    def __init__(self):
        self._pb, self.id = _connect()
        if self.id < 0:
            raise SandboxError("pybullet could not start a physics client")

    def __getattr__(self, name):
        fn = getattr(self._pb, name)
        if callable(fn):
            fn = functools.partial(fn, physicsClientId=self.id)
        else:
            return fn
        setattr(self, name, fn)
        return fn

    def close(self) -> None:
        if self.id >= 0:
            try:
                self._pb.disconnect(physicsClientId=self.id)
            except self._pb.error:
                pass
            self.id = -1


class TabletopOptions(SandboxOptions):
    seed: StrictInt = Field(0, description="the scene's random seed: where the objects lie")
    objects: Any = Field(None, description="the objects on the table (default: a random set for the seed)")
    image: Any = Field("640x480", description="the camera image's 'WxH'")

    # the scene's own readers, as the constructor reads them
    _read = read_by({"image": S.parse_image,
                     "objects": lambda v: v is None or S.parse_objects(v, np.random.default_rng(0))})


class TabletopSandbox:
    """A Panda arm, a table and a few cubes and plates in pybullet (the Robot protocol; see the module docstring)."""

    Options = TabletopOptions

    def __init__(self, limits: SandboxLimits | None = None, seed: int = 0, objects=None, image="640x480"):
        self.limits = limits or SandboxLimits()  # accepted for the protocol; motions are bounded in steps instead
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise SandboxError(f"seed: expected an integer, got {seed!r}")
        self.seed = seed
        try:
            self.width, self.height = S.parse_image(image)
            if objects is not None:
                S.parse_objects(objects, np.random.default_rng(0))  # fail now, not at start()
        except ValueError as err:
            raise SandboxError(str(err)) from None
        self.objects = objects
        self.K = S.intrinsics(self.width, self.height)
        self.E = S.look_at(S.CAMERA_EYE, S.CAMERA_TARGET)
        self._view, self._proj = S.gl_matrices(self.E, self.width, self.height)
        self._c: _Client | None = None
        self._chain: S.Chain | None = None
        self._objects: list[dict] = []  # name, kind, color, body
        self._seg: np.ndarray | None = None
        self._arm_target = np.array(HOME_Q)
        self._finger_target = FINGER_OPEN
        self._deadline: float | None = None  # of the action being done (act's argument)
        self._cut = ""  # how the last motion was cut short by the deadline, if it was

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> TabletopSandbox:
        if self._c is not None:
            return self
        try:
            import pybullet_data
        except ImportError:
            raise SandboxError("the robot sandbox needs pybullet (pip install pybullet)") from None
        self._data = pybullet_data.getDataPath()
        self._chain = S.Chain.from_urdf(f"{self._data}/franka_panda/panda.urdf", "panda_grasptarget")
        self._c = _Client()
        try:
            self.reset(self.seed)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        c, self._c = self._c, None
        if c is not None:
            c.close()

    def __enter__(self) -> TabletopSandbox:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _client(self) -> _Client:
        if self._c is None:
            raise SandboxError("the robot sandbox is not running (start() it, or open a new one)")
        return self._c

    # ----------------------------------------------------------------- the world

    def reset(self, seed: int | None = None) -> RobotObservation:
        """A fresh world drawn from `seed` (None: the current one again): the same seed always gives the same
        scene, and the same physics after it."""
        c = self._client()
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise SandboxError(f"reset: seed must be an integer, got {seed!r}")
            self.seed = seed
        rng = np.random.default_rng(self.seed)
        try:
            specs = S.parse_objects(self.objects, rng)
            poses = S.place_objects([k for _, k in specs], rng)
        except ValueError as err:
            raise SandboxError(str(err)) from None
        c.resetSimulation()
        c.setPhysicsEngineParameter(fixedTimeStep=DT, numSolverIterations=150, deterministicOverlappingPairs=1)
        c.setGravity(0, 0, -9.81)
        self._table = self._box([0.8, 0.8, 0.025], [0.45, 0.0, -0.025], S.TABLE_RGBA, mass=0.0)
        self._box([4.0, 4.0, 0.01], [0.0, 0.0, -0.76], S.FLOOR_RGBA, mass=0.0)  # the floor, a table's height down
        self._robot = c.loadURDF(f"{self._data}/franka_panda/panda.urdf", [0, 0, 0], useFixedBase=True)
        c.setCollisionFilterPair(self._robot, self._table, -1, -1, 0)  # the base stands on the table
        self._link_names = {-1: "base"}
        for j in range(c.getNumJoints(self._robot)):
            name = c.getJointInfo(self._robot, j)[12].decode()
            self._link_names[j] = name.replace("panda_", "").replace("leftfinger", "left finger").replace(
                "rightfinger", "right finger")
        for j, q in zip(ARM_JOINTS, HOME_Q):
            c.resetJointState(self._robot, j, q)
        for j in FINGERS:
            c.resetJointState(self._robot, j, FINGER_OPEN)
            c.changeDynamics(self._robot, j, lateralFriction=1.0, spinningFriction=0.01, frictionAnchor=1)
        # The URDF's mimic joint, which pybullet ignores: without it two equal finger forces let the pair drift
        # sideways round what they hold until one finger sits on its stop (the object ends up 1.7 cm off).
        gear = c.createConstraint(self._robot, FINGERS[0], self._robot, FINGERS[1], c.JOINT_GEAR, [1, 0, 0],
                                  [0, 0, 0], [0, 0, 0])
        c.changeConstraint(gear, gearRatio=-1, erp=0.1, maxForce=50)
        self._arm_target = np.array(HOME_Q)
        self._finger_target = FINGER_OPEN
        self._objects = []
        for (color, kind), (x, y, yaw) in zip(specs, poses):
            size = S.size_of(kind)
            pos = [x, y, size[2] / 2]
            quat = c.getQuaternionFromEuler([0, 0, yaw])
            if kind == "cube":
                body = self._box([s / 2 for s in size], pos, S.COLORS[color], mass=S.MASS[kind], orn=quat)
            else:
                col = c.createCollisionShape(c.GEOM_CYLINDER, radius=S.PLATE_RADIUS, height=S.PLATE_HEIGHT)
                vis = c.createVisualShape(c.GEOM_CYLINDER, radius=S.PLATE_RADIUS, length=S.PLATE_HEIGHT,
                                          rgbaColor=S.COLORS[color])
                body = c.createMultiBody(S.MASS[kind], col, vis, pos, quat)
            c.changeDynamics(body, -1, lateralFriction=1.0, spinningFriction=0.002, rollingFriction=0.0,
                             restitution=0.0)
            self._objects.append({"name": f"{color} {kind}", "kind": kind, "color": color, "body": body})
        self._command()
        self._run(60)  # let everything come to rest on the table
        return self.observe()

    def _box(self, half, pos, rgba, mass, orn=(0, 0, 0, 1)) -> int:
        c = self._c
        col = c.createCollisionShape(c.GEOM_BOX, halfExtents=half)
        vis = c.createVisualShape(c.GEOM_BOX, halfExtents=half, rgbaColor=rgba)
        body = c.createMultiBody(mass, col, vis, pos, orn)
        if mass == 0:
            c.changeDynamics(body, -1, lateralFriction=1.0)
        return body

    def observe(self) -> RobotObservation:
        c = self._client()
        w, h = self.width, self.height
        _, _, rgba, depth, seg = c.getCameraImage(w, h, self._view, self._proj, renderer=c.ER_TINY_RENDERER,
                                                  lightDirection=[0.6, 0.3, 1.0], shadow=0)
        rgba = np.asarray(rgba, dtype=np.uint8).reshape(h, w, 4)
        seg = np.asarray(seg, dtype=np.int64).reshape(h, w)
        lookup = {o["body"]: i for i, o in enumerate(self._objects)}
        index = np.full((h, w), -1, dtype=np.int32)
        for body, i in lookup.items():
            index[seg == body] = i
        self._seg = index
        state = c.getLinkState(self._robot, EE_LINK, computeForwardKinematics=True)
        return RobotObservation(rgb=rgba[:, :, :3].copy(), depth=S.linear_depth(np.asarray(depth).reshape(h, w)),
                                intrinsics=self.K.copy(), extrinsics=self.E.copy(), joints=self._joints().tolist(),
                                gripper_width=self._width(), ee_position=[float(v) for v in state[4]],
                                ee_orientation=[float(v) for v in state[5]])

    def _joints(self) -> np.ndarray:
        return np.array([s[0] for s in self._c.getJointStates(self._robot, ARM_JOINTS)])

    def _width(self) -> float:
        return float(sum(s[0] for s in self._c.getJointStates(self._robot, FINGERS)))

    def _ee(self) -> np.ndarray:
        return np.array(self._c.getLinkState(self._robot, EE_LINK, computeForwardKinematics=True)[4])

    # ----------------------------------------------------------------- simulation

    def _command(self) -> None:
        c = self._c
        c.setJointMotorControlArray(self._robot, ARM_JOINTS, c.POSITION_CONTROL, targetPositions=self._arm_target,
                                    targetVelocities=[0.0] * 7, forces=ARM_FORCES, positionGains=[0.08] * 7,
                                    velocityGains=[1.0] * 7)
        c.setJointMotorControlArray(self._robot, FINGERS, c.POSITION_CONTROL,
                                    targetPositions=[self._finger_target] * 2, forces=[GRIP_FORCE] * 2,
                                    positionGains=[0.03] * 2)

    def _run(self, steps: int, contacts: set | None = None, held: int | None = None) -> None:
        """Step the world `steps` times; collect the robot's unexpected contacts into `contacts`."""
        c = self._c
        for _ in range(steps):
            c.stepSimulation()
            if contacts is not None:
                contacts.update(self._unexpected(held))

    def _unexpected(self, held: int | None) -> set[tuple[str, str]]:
        out = set()
        names = {o["body"]: o["name"] for o in self._objects}
        names[self._table] = "table"
        for cp in self._c.getContactPoints(bodyA=self._robot):
            other = cp[2]
            if other == held or other not in names or other == self._robot:
                continue
            out.add((self._link_names.get(cp[3], f"link {cp[3]}"), names[other]))
        return out

    def _settle(self, contacts: set | None, held: int | None, max_steps: int = 480) -> None:
        """Step until the arm has reached its target and stopped (or max_steps)."""
        for i in range(0, max_steps, 10):
            self._run(10, contacts, held)
            states = self._c.getJointStates(self._robot, ARM_JOINTS + FINGERS)
            speed = max(abs(s[1]) for s in states)
            err = float(np.max(np.abs(np.array([s[0] for s in states[:7]]) - self._arm_target)))
            if speed < 0.005 and (err < 0.002 or i >= 120):
                return

    def _follow(self, path: list[np.ndarray]) -> tuple[set, int | None]:
        """Drive the arm through joint waypoints (at most ~1 rad/s per joint), then settle; contacts on the way."""
        held = self._held_body()
        contacts: set = set()
        q_prev = self._arm_target
        for k, q in enumerate(path):
            if passed(self._deadline):  # hold where the arm is now; _settle brings it to rest there
                self._cut = f"stopped after {k} of {len(path)} waypoints: {BUDGET_SPENT}"
                self._arm_target = self._joints()
                self._command()
                break
            steps = max(3, int(math.ceil(float(np.max(np.abs(q - q_prev))) / 0.004)))
            self._arm_target = np.asarray(q, dtype=np.float64)
            self._command()
            self._run(steps, contacts, held)
            q_prev = self._arm_target
        self._settle(contacts, held)
        return contacts, held

    # ----------------------------------------------------------------- actions

    def act(self, action: str, args: dict, deadline: float | None = None) -> str:
        self._client()
        if not isinstance(args, dict):
            raise SandboxError(f"{action}: arguments must be a dict, got {type(args).__name__}")
        self._deadline, self._cut = deadline, ""
        try:
            text = self._act(action, args)
        finally:
            self._deadline = None
        return f"{text}; {self._cut}" if self._cut else text

    def _act(self, action: str, args: dict) -> str:
        if action == "move_ee":
            return self._move_ee(args)
        if action == "move_joints":
            return self._move_joints(check_args(action, args, {"q"}, set())["q"], action)
        if action == "gripper":
            cmd = check_args(action, args, {"command"}, set())["command"]
            if cmd not in ("open", "close"):
                raise SandboxError(f"gripper: command must be 'open' or 'close', got {cmd!r}")
            return self._grip(cmd)
        if action == "home":
            check_args(action, args, set(), set())
            return "home: " + self._move_joints(list(HOME_Q), action)
        raise SandboxError(f"unknown action {action!r}; the robot does {', '.join(ACTIONS)}")

    def _move_ee(self, args: dict) -> str:
        args = check_args("move_ee", args, {"position"}, {"yaw"})
        pos = args["position"]
        if not (isinstance(pos, (list, tuple)) and len(pos) == 3 and all(is_number(v) for v in pos)):
            raise SandboxError(f"move_ee: position must be [x, y, z] in metres, got {pos!r}")
        yaw = args.get("yaw", 0.0)
        if not is_number(yaw):
            raise SandboxError(f"move_ee: yaw must be a number of radians, got {yaw!r}")
        target = np.array(pos, dtype=np.float64)
        where = f"({target[0]:.3f}, {target[1]:.3f}, {target[2]:.3f})"
        if target[2] < MIN_Z:
            raise SandboxError(f"move_ee: target {where} is below the table: the grasp point may go down to "
                               f"z = {MIN_Z} m (the table top is z = 0)")
        yaw = (float(yaw) + math.pi / 2) % math.pi - math.pi / 2  # the gripper looks the same a half turn round
        R_goal = S.down_rotation(yaw)
        q = self._joints()
        T, _ = self._chain.fk(q)
        start, R_start = T[:3, 3], T[:3, :3]
        turn = S.rotvec(R_goal @ R_start.T)
        n = max(1, int(math.ceil(max(np.linalg.norm(target - start) / STEP_M, np.linalg.norm(turn) / 0.05))))
        path = []
        for i in range(1, n + 1):
            s = i / n
            p_i = start + s * (target - start)
            R_i = S.rotation(turn * s) @ R_start
            q, ep, er = self._chain.ik(q, p_i, R_i, rest=HOME_Q, iters=60 if i < n else 300)
            if ep > REACH_TOL or er > 0.05:
                at = "at the target" if i == n else f"on the way, at ({p_i[0]:.3f}, {p_i[1]:.3f}, {p_i[2]:.3f})"
                raise SandboxError(f"move_ee: target {where} yaw {yaw:.2f} is out of reach (IK misses by "
                                   f"{ep * 1000:.0f} mm, {math.degrees(er):.0f}° {at}); nothing moved")
            path.append(q)
        contacts, _ = self._follow(path)
        ee = self._ee()
        err = float(np.linalg.norm(ee - target))
        got = f"({ee[0]:.3f}, {ee[1]:.3f}, {ee[2]:.3f})"
        text = (f"moved to {got}, {err * 1000:.1f} mm off" if err < REACH_TOL else
                f"stopped at {got}, {err * 1000:.1f} mm short of {where}"
                + ("" if self._cut else ": something is in the way"))
        return text + _contacts(contacts)

    def _move_joints(self, q, action: str) -> str:
        if not (isinstance(q, (list, tuple)) and len(q) == 7 and all(is_number(v) for v in q)):
            raise SandboxError(f"{action}: q must be 7 joint angles in radians, got {q!r}")
        goal = np.array(q, dtype=np.float64)
        for i, (v, lo, hi) in enumerate(zip(goal, self._chain.lower, self._chain.upper)):
            if not lo <= v <= hi:
                raise SandboxError(f"{action}: joint {i + 1} = {v:.3f} rad is outside its limits [{lo:.4f}, {hi:.4f}]")
        T, _ = self._chain.fk(goal)
        if T[2, 3] < MIN_Z:
            raise SandboxError(f"{action}: those joints put the grasp point at z = {T[2, 3]:.3f} m, below the "
                               f"lowest allowed z = {MIN_Z} m (the table top is z = 0); nothing moved")
        start = self._joints()
        n = max(1, int(math.ceil(float(np.max(np.abs(goal - start))) / 0.02)))
        contacts, _ = self._follow([start + (goal - start) * i / n for i in range(1, n + 1)])
        err = float(np.max(np.abs(self._joints() - goal)))
        ee = self._ee()
        text = (f"joints at {[round(float(v), 3) for v in self._joints()]}, {math.degrees(err):.1f}° off at most; "
                f"end effector at ({ee[0]:.3f}, {ee[1]:.3f}, {ee[2]:.3f})")
        return text + _contacts(contacts)

    def _grip(self, command: str) -> str:
        before = self.held()
        self._finger_target = FINGER_OPEN if command == "open" else 0.0
        self._command()
        last = self._width()
        for _ in range(0, 480, 10):  # until the fingers stop (open, closed, or squeezing something)
            self._run(10)
            w = self._width()
            if abs(w - last) < 1e-4:
                break
            last = w
        self._run(20)  # the squeeze builds up
        width = f"width {self._width() * 1000:.0f} mm"
        if command == "open":
            return f"opened ({width})" + (f"; released {before}" if before else "")
        now = self.held()
        return f"closed: holding {now} ({width})" if now else f"closed on nothing ({width})"

    # ----------------------------------------------------------------- ground truth (simulation only)

    def _held_body(self) -> int | None:
        touching = [set(cp[2] for cp in self._c.getContactPoints(bodyA=self._robot, linkIndexA=f)) for f in FINGERS]
        both = touching[0] & touching[1]
        for o in self._objects:
            if o["body"] in both:
                return o["body"]
        return None

    def held(self) -> str | None:
        """The object between the fingers (touched by both), or None."""
        self._client()
        body = self._held_body()
        return next((o["name"] for o in self._objects if o["body"] == body), None)

    def objects_truth(self) -> list[dict]:
        """Per object: name, kind, color, body (pybullet uid), position (centre, world), yaw, size (full extents)."""
        c = self._client()
        out = []
        for o in self._objects:
            pos, quat = c.getBasePositionAndOrientation(o["body"])
            R = np.array(c.getMatrixFromQuaternion(quat)).reshape(3, 3)
            out.append({**o, "position": [float(v) for v in pos], "yaw": float(math.atan2(R[1, 0], R[0, 0])),
                        "size": S.size_of(o["kind"])})
        return out

    def segmentation(self) -> np.ndarray:
        """HxW int32 for the last observe(): the index into objects_truth() of the object seen there, -1 elsewhere."""
        if self._seg is None:
            raise SandboxError("segmentation: nothing observed yet (call observe() or reset())")
        return self._seg.copy()

    def _extent_z(self, body: int, kind: str) -> tuple[float, float]:
        """(lowest, highest) z of an object from its pose and exact shape (AABBs carry collision margins)."""
        pos, quat = self._c.getBasePositionAndOrientation(body)
        half = S.half_height(kind, np.array(self._c.getMatrixFromQuaternion(quat)).reshape(3, 3))
        return pos[2] - half, pos[2] + half

    def is_on(self, obj_name: str, target_name: str) -> tuple[bool, str]:
        """Whether obj rests on target: centre over the target's footprint (1 cm inside its edge), bottom within
        1.5 cm above the target's top, at rest, not held. The reason says which test failed."""
        c = self._client()
        objs = {o["name"]: o for o in self._objects}
        for n in (obj_name, target_name):
            if n not in objs:
                raise SandboxError(f"is_on: no object named {n!r}; the scene has {', '.join(objs)}")
        o, t = objs[obj_name], objs[target_name]
        if self.held() == obj_name:
            return False, f"{obj_name} is still held"
        (op, _), (tp, tq) = c.getBasePositionAndOrientation(o["body"]), c.getBasePositionAndOrientation(t["body"])
        R = np.array(c.getMatrixFromQuaternion(tq)).reshape(3, 3)
        local = R.T @ (np.array(op) - np.array(tp))
        if t["kind"] == "plate":
            off, limit = float(math.hypot(local[0], local[1])), S.PLATE_RADIUS - 0.01
            inside = off <= limit
        else:
            off, limit = float(max(abs(local[0]), abs(local[1]))), S.CUBE_EDGE / 2 - 0.01
            inside = off <= limit
        if not inside:
            return False, (f"{obj_name}'s centre is {off * 100:.1f} cm from {target_name}'s centre "
                           f"(limit {limit * 100:.1f})")
        gap = self._extent_z(o["body"], o["kind"])[0] - self._extent_z(t["body"], t["kind"])[1]
        if not -0.005 <= gap <= 0.015:
            return False, f"{obj_name}'s bottom is {gap * 100:.1f} cm above {target_name}'s top (expected 0 to 1.5)"
        v, w = c.getBaseVelocity(o["body"])
        if np.linalg.norm(v) > 0.02 or np.linalg.norm(w) > 0.3:
            return False, f"{obj_name} is still moving ({np.linalg.norm(v) * 100:.1f} cm/s)"
        return True, f"{obj_name} rests on {target_name} ({off * 100:.1f} cm from its centre)"


# ----------------------------------------------------------------- helpers


def _contacts(contacts: set) -> str:
    if not contacts:
        return ""
    return "; contacts: " + ", ".join(f"{a}–{b}" for a, b in sorted(contacts))


# ----------------------------------------------------------------- a scripted pick-and-place from ground truth


grasp_yaw = S.grasp_yaw


def scripted_pick_place(robot: TabletopSandbox, pick: str, place: str, clearance: float = 0.15,
                        check_grasp: bool = True, retries: int = 2) -> tuple[bool, list[str]]:
    """Put `pick` on `place` from ground truth: open, above, down, close (re-try from the object's new pose when
    the fingers hold nothing and check_grasp), lift to `clearance`, over the target, down, open, up, home.
    Returns (is_on, the log of every action and its account)."""
    log: list[str] = []

    def do(action, args):
        text = robot.act(action, args)
        log.append(f"{action} {args}: {text}")
        return text

    def truth(name):
        return next(o for o in robot.objects_truth() if o["name"] == name)

    for _attempt in range(1 + (retries if check_grasp else 0)):
        o = truth(pick)
        x, y, z = o["position"]
        yaw = grasp_yaw(o["yaw"])
        do("gripper", {"command": "open"})
        do("move_ee", {"position": [x, y, clearance], "yaw": yaw})
        do("move_ee", {"position": [x, y, max(MIN_Z, z + o["size"][2] / 2 - 0.02)], "yaw": yaw})
        if "holding" in do("gripper", {"command": "close"}) or not check_grasp:
            break
        do("move_ee", {"position": [x, y, clearance], "yaw": yaw})
    do("move_ee", {"position": [x, y, clearance], "yaw": yaw})
    t = truth(place)
    below = robot._ee()[2] - truth(pick)["position"][2]  # where the object hangs under the grasp point
    top = robot._extent_z(t["body"], t["kind"])[1]
    tx, ty, _ = t["position"]
    do("move_ee", {"position": [tx, ty, clearance], "yaw": yaw})
    do("move_ee", {"position": [tx, ty, top + o["size"][2] / 2 + below + 0.01], "yaw": yaw})
    do("gripper", {"command": "open"})
    do("move_ee", {"position": [tx, ty, clearance], "yaw": yaw})
    do("home", {})
    ok, why = robot.is_on(pick, place)
    log.append(f"is_on: {ok}, {why}")
    return ok, log

"""The tabletop robot sandbox (toolpath/sandboxes/robot.py): scene, camera geometry, motions, grasps, truth."""

from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest

pytest.importorskip("pybullet")

from toolpath.sandboxes import robot_scene as S  # noqa: E402
from toolpath.sandboxes.base import SandboxError, SandboxLimits  # noqa: E402
from toolpath.sandboxes.robot_sim import HOME_Q, TabletopSandbox, grasp_yaw, scripted_pick_place  # noqa: E402


@pytest.fixture(scope="module")
def box():
    with TabletopSandbox(seed=0) as sb:
        yield sb


def names(sb, kind):
    return [o["name"] for o in sb.objects_truth() if o["kind"] == kind]


def off_mm(text: str) -> float:
    m = re.search(r"([\d.]+) mm off", text)
    assert m, text
    return float(m.group(1))


# ----------------------------------------------------------------- scene and observation


def test_same_seed_same_scene_other_seed_other_scene(box):
    a = box.reset(3)
    truth_a = box.objects_truth()
    b = box.reset(3)
    truth_b = box.objects_truth()
    assert [o["name"] for o in truth_a] == [o["name"] for o in truth_b]
    for x, y in zip(truth_a, truth_b):
        assert x["position"] == y["position"] and x["yaw"] == y["yaw"]
    assert np.array_equal(a.rgb, b.rgb) and np.array_equal(a.depth, b.depth)
    box.reset(4)
    other = box.objects_truth()
    assert [o["position"] for o in other] != [o["position"] for o in truth_a]


def test_default_scene_two_cubes_two_plates_inside_the_workspace_apart(box):
    for seed in range(6):
        box.reset(seed)
        truth = box.objects_truth()
        assert sorted(o["kind"] for o in truth) == ["cube", "cube", "plate", "plate"]
        assert len({o["color"] for o in truth}) == 4
        for o in truth:
            x, y, z = o["position"]
            r = S.radius_of(o["kind"])
            assert S.WORKSPACE_X[0] + r - 1e-3 <= x <= S.WORKSPACE_X[1] - r + 1e-3
            assert S.WORKSPACE_Y[0] + r - 1e-3 <= y <= S.WORKSPACE_Y[1] - r + 1e-3
            assert z == pytest.approx(o["size"][2] / 2, abs=2e-3)  # resting on the table
        for i, a in enumerate(truth):
            for b in truth[i + 1:]:
                d = math.dist(a["position"][:2], b["position"][:2])
                assert d > S.radius_of(a["kind"]) + S.radius_of(b["kind"])


def test_observation_fields(box):
    obs = box.reset(0)
    assert obs.rgb.shape == (480, 640, 3) and obs.rgb.dtype == np.uint8
    assert obs.depth.shape == (480, 640) and obs.depth.dtype == np.float32
    assert obs.intrinsics.shape == (3, 3) and obs.extrinsics.shape == (4, 4)
    assert len(obs.joints) == 7 and np.allclose(obs.joints, HOME_Q, atol=1e-2)
    assert obs.gripper_width == pytest.approx(0.08, abs=2e-3)
    assert len(obs.ee_position) == 3 and len(obs.ee_orientation) == 4
    assert obs.ee_position[2] > 0.3  # home is up and back
    from PIL import Image

    img = Image.open(io.BytesIO(obs.png()))
    assert img.size == (640, 480) and img.mode == "RGB"
    dimg = Image.open(io.BytesIO(obs.depth_png()))
    mm = np.array(dimg)
    assert dimg.size == (640, 480) and mm.dtype in (np.uint16, np.int32)
    valid = obs.depth > 0
    assert np.abs(mm[valid] - obs.depth[valid] * 1000).max() <= 1.0
    # the robot's colours are the Panda's own (grey/white), the table neutral grey: little saturation off objects
    seg = box.segmentation()
    rgb = obs.rgb.astype(int)
    sat = rgb.max(axis=2) - rgb.min(axis=2)
    assert np.percentile(sat[seg < 0], 99) < 20


def test_image_option_and_objects_option():
    with TabletopSandbox(SandboxLimits(), seed=5, objects=["red cube", {"kind": "plate", "color": "blue"}],
                         image="320x240") as sb:
        obs = sb.observe()
        assert obs.rgb.shape == (240, 320, 3)
        assert [o["name"] for o in sb.objects_truth()] == ["red cube", "blue plate"]
        assert obs.intrinsics[0, 2] == pytest.approx(159.5)
    assert {"seed", "objects", "image"} <= set(TabletopSandbox.Options.model_fields)


@pytest.mark.parametrize("kw, words", [({"objects": ["red sphere"]}, "unknown kind"),
                                       ({"objects": ["pink cube"]}, "unknown color"),
                                       ({"objects": ["red cube", "red cube"]}, "twice"),
                                       ({"objects": [{"kind": "cube"}]}, "objects[0]"),
                                       ({"image": "big"}, "image"), ({"seed": "x"}, "seed")])
def test_bad_options_are_named(kw, words):
    with pytest.raises(SandboxError, match=re.escape(words)):
        TabletopSandbox(**kw)


def test_not_started_is_a_clear_error():
    sb = TabletopSandbox()
    with pytest.raises(SandboxError, match="not running"):
        sb.act("home", {})


# ----------------------------------------------------------------- camera geometry


def backproject(obs, mask):
    v, u = np.nonzero(mask & (obs.depth > 0))
    z = obs.depth[v, u].astype(np.float64)
    rays = np.linalg.inv(obs.intrinsics) @ np.stack([u, v, np.ones_like(u)]).astype(np.float64)
    cam = rays * z
    E = obs.extrinsics
    return (E[:3, :3].T @ (cam - E[:3, 3:4])).T


@pytest.mark.parametrize("seed", [0, 7])
def test_intrinsics_extrinsics_depth_agree_with_the_truth(box, seed):
    obs = box.reset(seed)
    seg = box.segmentation()
    for i, o in enumerate(box.objects_truth()):
        (u, v), = S.project(obs.intrinsics, obs.extrinsics, [o["position"]])
        assert seg[int(round(v)), int(round(u))] == i, o["name"]
        pts = backproject(obs, seg == i)
        top = np.percentile(pts[:, 2], 98)
        assert top == pytest.approx(o["size"][2], abs=0.005), o["name"]
        upper = pts[pts[:, 2] > top - 0.004]
        assert np.linalg.norm(upper[:, :2].mean(axis=0) - o["position"][:2]) < 0.01, o["name"]


def test_pixels_follow_the_opencv_convention_to_the_sub_pixel():
    # A cube straight in front of the camera (y = 0, square on) is symmetric about u = cx; the bare table plane
    # back-projects to z = 0 at every pixel, which it only does with the right cy (a half-pixel error is ~1 mm).
    with TabletopSandbox(seed=0, objects=["red cube"]) as sb:
        c = sb._c
        c.resetBasePositionAndOrientation(sb._robot, [0, 0, -5], [0, 0, 0, 1])
        c.resetBasePositionAndOrientation(sb._objects[0]["body"], [0.5, 0, S.CUBE_EDGE / 2], [0, 0, 0, 1])
        obs = sb.observe()
        seg = sb.segmentation()
        _, u = np.nonzero(seg == 0)
        assert u.mean() == pytest.approx(obs.intrinsics[0, 2], abs=0.05)
        pts = backproject(obs, (seg < 0))
        table = pts[pts[:, 2] > -0.1]  # not the floor
        assert len(table) > 100_000 and np.abs(table[:, 2]).max() < 2e-4


def test_whole_workspace_in_view_and_the_arm_at_home_hides_nothing(box):
    obs = box.reset(2)
    corners = [(x, y, z) for x in S.WORKSPACE_X for y in S.WORKSPACE_Y for z in (0.0, 0.05)]
    uv = S.project(obs.intrinsics, obs.extrinsics, corners)
    assert (uv[:, 0] > 10).all() and (uv[:, 0] < 630).all() and (uv[:, 1] > 10).all() and (uv[:, 1] < 470).all()
    with_arm = box.segmentation()
    c = box._c
    c.resetBasePositionAndOrientation(box._robot, [0, 0, -5], [0, 0, 0, 1])  # render without the robot
    box.observe()
    without = box.segmentation()
    c.resetBasePositionAndOrientation(box._robot, [0, 0, 0], [0, 0, 0, 1])
    for i in range(len(box.objects_truth())):
        assert (with_arm == i).sum() == (without == i).sum() > 300


# ----------------------------------------------------------------- motions


def test_move_ee_reaches_the_target_pointing_down(box):
    box.reset(0)
    text = box.act("move_ee", {"position": [0.5, 0.1, 0.15], "yaw": 0.3})
    assert text.startswith("moved to (0.500, 0.100, 0.150)") and off_mm(text) < 3
    obs = box.observe()
    assert np.linalg.norm(np.array(obs.ee_position) - [0.5, 0.1, 0.15]) < 0.003
    R = np.array(box._c.getMatrixFromQuaternion(obs.ee_orientation)).reshape(3, 3)
    assert R[:, 2] == pytest.approx([0, 0, -1], abs=0.02)  # the fingers point down
    assert math.atan2(R[1, 0], R[0, 0]) == pytest.approx(0.3, abs=0.03)
    text = box.act("move_ee", {"position": [0.65, -0.2, 0.05]})
    assert off_mm(text) < 3
    assert "home" in box.act("home", {}) and np.allclose(box.observe().joints, HOME_Q, atol=0.01)


def test_move_ee_goes_in_a_straight_line(box):
    box.reset(0)
    box.act("move_ee", {"position": [0.45, -0.1, 0.2]})
    a, b = np.array([0.45, -0.1, 0.2]), np.array([0.6, 0.15, 0.2])
    worst = 0.0
    orig = box._run

    def spy(steps, contacts=None, held=None):
        nonlocal worst
        orig(steps, contacts, held)
        p = box._ee()
        t = np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0, 1)
        worst = max(worst, float(np.linalg.norm(p - (a + t * (b - a)))))

    box._run = spy
    try:
        box.act("move_ee", {"position": b.tolist()})
    finally:
        del box._run
    assert worst < 0.01


def test_a_deadline_stops_a_motion_where_the_arm_is_and_says_so(box):
    import time

    from toolpath.deadline import BUDGET_SPENT

    box.reset(0)
    before = box.observe().ee_position
    text = box.act("move_ee", {"position": [0.6, 0.15, 0.1]}, deadline=time.monotonic() - 1)
    assert re.search(r"stopped after 0 of \d+ waypoints", text) and BUDGET_SPENT in text
    assert "something is in the way" not in text
    assert np.linalg.norm(np.array(box.observe().ee_position) - before) < 0.005  # it held where it was
    text = box.act("move_ee", {"position": [0.6, 0.15, 0.1]}, deadline=time.monotonic() + 60)
    assert text.startswith("moved to") and "stopped" not in text


@pytest.mark.parametrize("args, words", [
    ({"position": [1.3, 0.0, 0.1]}, "out of reach"),
    ({"position": [0.5, 0.0, -0.02]}, "below the table"),
    ({"position": [0.5, 0.0]}, "position must be [x, y, z]"),
    ({"position": ["a", 0, 0.1]}, "position must be [x, y, z]"),
    ({"position": [0.5, 0.0, float("nan")]}, "position must be [x, y, z]"),
    ({"position": [0.5, 0, 0.1], "yaw": "left"}, "yaw must be a number"),
    ({"position": [0.5, 0, 0.1], "speed": 2}, "unknown speed"),
    ({}, "missing position")])
def test_move_ee_refusals_name_the_problem_and_move_nothing(box, args, words):
    box.reset(0)
    before = box.observe().joints
    with pytest.raises(SandboxError, match=re.escape(words)) as err:
        box.act("move_ee", args)
    if words == "out of reach":
        assert "(1.300, 0.000, 0.100)" in str(err.value)
    assert np.allclose(box.observe().joints, before, atol=1e-6)


def test_other_bad_actions(box):
    box.reset(0)
    with pytest.raises(SandboxError, match="unknown action 'fly'"):
        box.act("fly", {})
    with pytest.raises(SandboxError, match="open' or 'close"):
        box.act("gripper", {"command": "squeeze"})
    with pytest.raises(SandboxError, match="joint 4 = 0.500 rad is outside"):
        box.act("move_joints", {"q": [0, 0, 0, 0.5, 0, 1.5, 0.7]})
    with pytest.raises(SandboxError, match="7 joint angles"):
        box.act("move_joints", {"q": [0, 0]})
    with pytest.raises(SandboxError, match="no arguments"):
        box.act("home", {"fast": True})
    text = box.act("move_joints", {"q": [0.3, -0.5, 0.0, -2.2, 0.0, 1.7, 0.8]})
    assert "joints at" in text and np.allclose(box.observe().joints, [0.3, -0.5, 0.0, -2.2, 0.0, 1.7, 0.8], atol=0.01)


def test_contacts_with_other_objects_are_reported(box):
    box.reset(0)
    plate = next(o for o in box.objects_truth() if o["kind"] == "plate")
    x, y, _ = plate["position"]
    box.act("move_ee", {"position": [x, y, 0.1]})
    text = box.act("move_ee", {"position": [x, y, 0.012]})  # fingertips go 5 mm into the plate
    assert "contacts:" in text and plate["name"] in text and "finger" in text


# ----------------------------------------------------------------- grasping and the success check


def test_gripper_holds_a_cube_and_lifts_it(box):
    box.reset(1)
    cube = next(o for o in box.objects_truth() if o["kind"] == "cube")
    x, y, z = cube["position"]
    yaw = grasp_yaw(cube["yaw"])
    assert box.act("gripper", {"command": "open"}).startswith("opened (width 80 mm)")
    box.act("move_ee", {"position": [x, y, 0.15], "yaw": yaw})
    text = box.act("move_ee", {"position": [x, y, 0.025], "yaw": yaw})
    assert "contacts" not in text, text
    text = box.act("gripper", {"command": "close"})
    assert text.startswith(f"closed: holding {cube['name']} (width 4")  # about 45 mm
    assert box.held() == cube["name"]
    assert box.is_on(cube["name"], names(box, "plate")[0])[0] is False
    held_ok, why = box.is_on(cube["name"], names(box, "plate")[0])
    assert "held" in why
    box.act("move_ee", {"position": [x, y, 0.2], "yaw": yaw})
    lifted = next(o for o in box.objects_truth() if o["name"] == cube["name"])
    assert lifted["position"][2] > 0.15
    assert "released" in box.act("gripper", {"command": "open"})
    box.act("home", {})
    assert box.held() is None
    assert box.act("gripper", {"command": "close"}).startswith("closed on nothing")


@pytest.mark.parametrize("seed", [10, 21, 33])
def test_scripted_pick_and_place(box, seed):
    box.reset(seed)
    cube, plate = names(box, "cube")[seed % 2], names(box, "plate")[1]
    ok, log = scripted_pick_place(box, cube, plate)
    assert ok, "\n".join(log)
    on, why = box.is_on(cube, plate)
    assert on and "rests on" in why
    # and the other combinations are false, each with a reason
    other_plate = names(box, "plate")[0]
    on, why = box.is_on(cube, other_plate)
    assert not on and "centre" in why
    other_cube = names(box, "cube")[1 - seed % 2]
    on, why = box.is_on(other_cube, plate)
    assert not on and why


def test_a_stack_cube_on_cube_on_plate():
    with TabletopSandbox(seed=2, objects=["red cube", "blue cube", "green plate"]) as sb:
        ok, log = scripted_pick_place(sb, "blue cube", "green plate")
        assert ok, "\n".join(log)
        ok, log = scripted_pick_place(sb, "red cube", "blue cube")
        assert ok, "\n".join(log)
        assert sb.is_on("blue cube", "green plate")[0]
        on, why = sb.is_on("red cube", "green plate")  # over the plate, but on the cube: too high
        assert not on and "above green plate's top" in why


def test_is_on_refuses_unknown_names(box):
    box.reset(0)
    with pytest.raises(SandboxError, match="no object named 'gold cube'"):
        box.is_on("gold cube", names(box, "plate")[0])


def test_two_sandboxes_are_independent():
    with TabletopSandbox(seed=0) as a, TabletopSandbox(seed=0) as b:
        assert a._c.id != b._c.id
        assert np.array_equal(a.observe().rgb, b.observe().rgb)  # one seed, one scene, in either world
        before = b.objects_truth()
        a.act("move_ee", {"position": [0.5, 0.0, 0.1]})
        a.reset(9)
        assert np.allclose(b.observe().joints, HOME_Q, atol=1e-2)
        assert [o["position"] for o in b.objects_truth()] == [o["position"] for o in before]
        assert [o["name"] for o in a.objects_truth()] != [o["name"] for o in before] or \
            [o["position"] for o in a.objects_truth()] != [o["position"] for o in before]
    with pytest.raises(SandboxError, match="not running"):
        a.observe()

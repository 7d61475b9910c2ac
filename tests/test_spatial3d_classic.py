"""The classic reconstruction backend on scenes rendered from known cameras (toolpath.tools.spatial3d.synthetic),
and its honesty: views it cannot place are declined (NaN pose, confidence 0), never guessed."""

import math
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("cv2")
pytest.importorskip("scipy")

from toolpath.tools.spatial3d import synthetic as S  # noqa: E402
from toolpath.tools.spatial3d.classic import GUESSED_FOCAL, reconstruct_classic  # noqa: E402
from toolpath.tools.spatial3d.poses import camera_center, describe_camera_motion  # noqa: E402
from toolpath.tools.spatial3d.scene import Reconstruction  # noqa: E402

W, H = 480, 360  # smaller than the benchmark's 640x480 to keep the file fast; same scenes and cameras


@pytest.fixture(scope="module")
def pairs():
    return [S.random_pair(seed, width=W, height=H) for seed in range(100, 106)]


@pytest.fixture(scope="module")
def four_views():
    return S.random_views(3, n=4, width=W, height=H)


def truth(p) -> Reconstruction:
    return Reconstruction(p.points, p.extrinsics, np.stack([p.K] * len(p.extrinsics)))


def test_pairs_recover_rotation_translation_direction_and_the_motion_description(pairs):
    rot, dirs = [], []
    for p in pairs:
        r = reconstruct_classic(p.images, [p.K, p.K])
        assert r.registered.all(), r.info["pairs"]
        rot.append(S.rotation_error_deg(r.extrinsics[1], p.extrinsics[1]))
        dirs.append(S.direction_error_deg(r.extrinsics[1], p.extrinsics[1]))
        said, true = describe_camera_motion(r), describe_camera_motion(truth(p))
        assert S.same_description(said, true), (said, true)
    assert np.median(rot) <= 2.0 and max(rot) <= 5.0
    assert np.median(dirs) <= 5.0


def test_world_is_camera_zero_and_the_first_baseline_is_one(pairs):
    r = reconstruct_classic(pairs[0].images, [pairs[0].K] * 2)
    assert np.array_equal(r.extrinsics[0], np.eye(4))
    assert np.linalg.norm(camera_center(r.extrinsics[1])) == pytest.approx(1.0)
    assert r.info["world_camera"] == 0 and r.backend == "classic"
    assert r.confidence[0] > 30 and r.confidence[1] > 30  # inlier counts, not a made-up 1.0


def test_points_are_coloured_and_lie_where_the_scene_is(pairs):
    p = pairs[1]
    r = reconstruct_classic(p.images, [p.K, p.K])
    assert r.points.shape[1] == 6 and len(r.points) > 100
    assert r.points[:, 3:].min() >= 0 and r.points[:, 3:].max() <= 1
    assert (r.points[:, 2] > 0).mean() > 0.95  # in front of camera 0
    # Up to scale, the depths match the ground truth's: scale them by the true baseline and compare medians.
    true_baseline = np.linalg.norm(camera_center(p.extrinsics[1]))
    seen_by_0 = p.points[p.points[:, 2] > 0]
    assert np.median(r.points[:, 2]) * true_baseline == pytest.approx(np.median(seen_by_0[:, 2]), rel=0.5)


def test_four_views_register_incrementally_with_bundle_adjustment(four_views):
    v = four_views
    r = reconstruct_classic(v.images, [v.K] * 4)
    assert r.registered.all(), r.info["declined"]
    for k in range(1, 4):
        assert S.rotation_error_deg(r.extrinsics[k], v.extrinsics[k]) <= 2.0
        assert S.direction_error_deg(r.extrinsics[k], v.extrinsics[k]) <= 5.0
    info = r.info
    assert len(info["ba"]) >= 3 and info["ba"][-1]["final"] and info["ba"][-1]["views"] == 4
    assert info["reprojection_rmse_after_ba"] <= info["ba"][-1]["rmse_before"] + 1e-9
    assert info["reprojection_rmse_after_ba"] < 1.0  # pixels at the working size
    assert {"pairs", "seconds", "features", "confidence"} <= set(info)


def test_a_view_sharing_nothing_is_declined_not_guessed(pairs):
    p = pairs[2]
    noise = (np.random.default_rng(0).random((H, W, 3)) * 255).astype(np.uint8)
    blank = np.full((H, W, 3), 128, np.uint8)
    r = reconstruct_classic([p.images[0], p.images[1], noise, blank], [p.K] * 4)
    assert r.registered.tolist() == [True, True, False, False]
    assert r.confidence[2] == 0 and r.confidence[3] == 0
    assert np.isnan(r.extrinsics[2:]).all()
    assert set(r.info["declined"]) == {"2", "3"}
    with pytest.raises(ValueError, match="not recovered"):
        describe_camera_motion(r, 0, 2)


def test_when_camera_zero_is_declined_the_world_is_the_first_registered_camera_and_info_says_so(pairs):
    p = pairs[4]
    noise = (np.random.default_rng(3).random((H, W, 3)) * 255).astype(np.uint8)
    r = reconstruct_classic([noise, p.images[0], p.images[1]], [p.K] * 3)
    assert r.registered.tolist() == [False, True, True]
    assert r.info["world_camera"] == 1 and np.array_equal(r.extrinsics[1], np.eye(4))
    assert S.rotation_error_deg(r.extrinsics[2], p.extrinsics[1]) <= 2.0


def test_two_unrelated_images_give_no_pose_at_all():
    rng = np.random.default_rng(1)
    a, b = ((rng.random((H, W, 3)) * 255).astype(np.uint8) for _ in range(2))
    r = reconstruct_classic([a, b])
    assert not r.registered.any() and np.isnan(r.extrinsics).all() and len(r.points) == 0


def wall_views(angle_deg, center, yaw):
    """Two views of one textured wall (nothing else), turned angle_deg from facing camera 0."""
    a = math.radians(angle_deg)
    edge = np.array([math.cos(a), 0.0, math.sin(a)]) * 10
    wall = [S.Quad(np.array([0, -3.0, 4.0]) - edge / 2, edge, np.array([0, 6.0, 0]),
                   S.texture(np.random.default_rng(2), 1000, 600))]
    K = S.intrinsics(W, H)
    poses = [S.look_pose([0.0, 0.0, 0.0], 0.0), S.look_pose(center, yaw)]
    return [S.render(wall, E, K, W, H)[0] for E in poses], K, poses[1]


def test_one_plane_whose_homography_allows_two_poses_is_declined():
    # Both decompositions of the wall's homography put it in front of both cameras and fit every match.
    images, K, _ = wall_views(65, [-0.6, 0.0, 0.4], -20.0)
    r = reconstruct_classic(images, [K, K])
    assert not r.registered.any()
    assert r.info["pairs"]["0-1"]["support"] > 100  # plenty of real matches: declined for ambiguity, not for lack
    assert "two different poses" in r.info["declined"]["0"]


def test_one_plane_with_a_single_physical_pose_is_still_recovered():
    # Here the twin would put the wall behind a camera, so the plane alone pins the pose down.
    images, K, truth_E = wall_views(30, [0.8, 0.05, 0.3], 25.0)
    r = reconstruct_classic(images, [K, K])
    assert r.registered.all()
    assert S.rotation_error_deg(r.extrinsics[1], truth_E) <= 1.0


def test_turning_in_place_is_declined_or_described_as_no_movement():
    p = S.random_pair(1, width=W, height=H, move_range=(0.0, 0.0))  # only a few cm of height change
    r = reconstruct_classic(p.images, [p.K, p.K])
    if r.registered.all():
        said = describe_camera_motion(r)
        assert said.startswith("camera 2 relative to camera 1: no significant movement"), said
        assert S.rotation_error_deg(r.extrinsics[1], p.extrinsics[1]) <= 2.0
    else:
        assert np.isnan(r.extrinsics[1]).all()


def test_images_of_different_sizes_with_their_own_intrinsics(pairs):
    import cv2

    p = pairs[3]
    small = cv2.resize(p.images[1], (W // 2, H // 2), interpolation=cv2.INTER_AREA)
    K_small = p.K.copy()
    K_small[:2, :2] /= 2
    K_small[:2, 2] = (K_small[:2, 2] + 0.5) / 2 - 0.5  # the same camera at half the pixels
    r = reconstruct_classic([p.images[0], small], [p.K, K_small])
    assert r.registered.all()
    assert S.rotation_error_deg(r.extrinsics[1], p.extrinsics[1]) <= 2.0
    assert r.image_sizes == [(W, H), (W // 2, H // 2)]
    assert np.allclose(r.intrinsics[1], K_small)


def test_without_intrinsics_the_guess_is_documented_and_in_the_given_pixels(pairs):
    import cv2

    big = [cv2.resize(im, (2 * W, 2 * H)) for im in pairs[4].images]  # larger than the working size
    r = reconstruct_classic(big)
    assert r.info["focal_guessed"] is True
    assert r.intrinsics[0][0, 0] == pytest.approx(GUESSED_FOCAL * 2 * W)
    assert r.intrinsics[0][:2, 2] == pytest.approx([(2 * W - 1) / 2, (2 * H - 1) / 2])
    assert r.info["work_size"][0] == [640, 480]


def test_one_image_is_its_own_frame_with_no_points(pairs):
    r = reconstruct_classic([pairs[0].images[0]])
    assert np.array_equal(r.extrinsics[0], np.eye(4)) and r.registered.all() and len(r.points) == 0


@pytest.mark.parametrize("images, match", [
    ([], "no images"),
    ([np.zeros((64, 64), np.uint8)], "HxWx3"),
    ([np.zeros((64, 64, 4), np.uint8)], "HxWx3"),
    ([np.zeros((64, 64, 3), np.float32)], "uint8"),
    ([np.zeros((8, 8, 3), np.uint8)], "too small"),
])
def test_bad_images_are_refused_clearly(images, match):
    with pytest.raises(ValueError, match=match):
        reconstruct_classic(images)


def test_bad_intrinsics_and_options_are_refused_clearly():
    img = np.zeros((64, 64, 3), np.uint8)
    with pytest.raises(ValueError, match="1 intrinsics for 2 images"):
        reconstruct_classic([img, img], [np.eye(3)])
    with pytest.raises(ValueError, match="positive focals"):
        reconstruct_classic([img, img], [np.zeros((3, 3))] * 2)
    with pytest.raises(TypeError, match="unknown option.*max_sides"):
        reconstruct_classic([img, img], max_sides=100)


def test_save_and_load_keep_the_statistics(tmp_path, pairs):
    r = reconstruct_classic(pairs[5].images, [pairs[5].K] * 2)
    r.save(tmp_path / "r.npz")
    back = Reconstruction.load(tmp_path / "r.npz")
    assert np.allclose(back.extrinsics, r.extrinsics) and np.allclose(back.confidence, r.confidence)
    assert back.info["pairs"]["0-1"]["support"] == r.info["pairs"]["0-1"]["support"]


def test_importing_the_backend_does_not_import_opencv_or_scipy():
    code = ("import sys, toolpath.tools.spatial3d.classic, toolpath.tools.spatial3d.synthetic; "
            "print(any(m == 'cv2' or m.startswith('scipy') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_same_description_compares_bins_and_turn_angles():
    a = "camera 2 relative to camera 1: moved forward-left, turned left by about 31°"
    assert S.same_description(a, "camera 2 relative to camera 1: moved forward-left, turned left by about 33°")
    assert not S.same_description(a, "camera 2 relative to camera 1: moved left, turned left by about 31°")
    assert not S.same_description(a, "camera 2 relative to camera 1: moved forward-left, turned right by about 31°")
    assert not S.same_description(a, "camera 2 relative to camera 1: moved forward-left, no significant turn")
    assert math.isclose(S.rotation_error_deg(np.eye(4), S.look_pose([0, 0, 0], 30.0)), 30.0)

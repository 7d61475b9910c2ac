"""The learned backend's code path on a tiny random depth model (no weights here): shapes and conventions."""

import numpy as np
import pytest

pytest.importorskip("transformers")

from toolpath.tools.spatial3d import QuestionImages as Scene
from toolpath.tools.spatial3d import camera_center, reconstruct
from toolpath.tools.spatial3d.learned import backproject, default_intrinsics, reconstruct_learned


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from transformers import DPTConfig, DPTForDepthEstimation, DPTImageProcessor

    cfg = DPTConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=37, image_size=64,
                    patch_size=16, neck_hidden_sizes=[16, 16, 16, 16], fusion_hidden_size=16,
                    backbone_out_indices=[0, 1, 2, 3], reassemble_factors=[4, 2, 1, 0.5], head_in_index=-1)
    folder = tmp_path_factory.mktemp("tiny-dpt")
    DPTForDepthEstimation(cfg).save_pretrained(folder)
    DPTImageProcessor(size={"height": 64, "width": 64}, keep_aspect_ratio=False).save_pretrained(folder)
    return str(folder)


def test_backprojection_puts_the_principal_point_on_the_optical_axis():
    K = default_intrinsics(80, 60)
    depth = np.full((60, 80), 2.0)
    pts = backproject(depth, K, np.eye(4), np.zeros((60, 80, 3), np.uint8), step=1)
    centre = pts[30 * 80 + 40]
    assert np.allclose(centre[:3], [0, 0, 2.0])
    E = np.eye(4)
    E[:3, 3] = [0, 0, -1.0]  # t = -R C: a camera at world z = 1, looking along +z
    assert np.allclose(backproject(depth, K, E, np.zeros((60, 80, 3), np.uint8), 1)[30 * 80 + 40][:3], [0, 0, 3.0])


def test_one_image_gives_dense_points_in_front_of_an_identity_camera(tiny_model, tmp_path, monkeypatch):
    from PIL import Image

    rng = np.random.default_rng(0)
    img = (rng.random((48, 80, 3)) * 255).astype(np.uint8)
    recon = reconstruct_learned([img], model_path=tiny_model, max_points=1000)
    assert recon.points.shape[1] == 6 and 500 <= len(recon.points) <= 4000
    assert np.allclose(recon.extrinsics[0], np.eye(4)) and recon.registered.tolist() == [True]
    assert (recon.points[:, 2] > 0).all()  # everything is in front of the camera (OpenCV: +z forward)
    assert recon.image_sizes == [(80, 48)] and np.allclose(camera_center(recon.extrinsics[0]), 0)
    # through reconstruct(), with the weights given by the environment, and cached
    path = tmp_path / "one.png"
    Image.fromarray(img).save(path)
    monkeypatch.setenv("TOOLPATH_DEPTH_MODEL", tiny_model)
    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    first = reconstruct(Scene([path]), backend="learned")
    assert len(list((tmp_path / "home" / "spatial3d").glob("learned-*.npz"))) == 1
    assert np.allclose(reconstruct(Scene([path]), backend="learned").points, first.points)


def test_without_weights_it_says_what_to_set(monkeypatch):
    monkeypatch.delenv("TOOLPATH_DEPTH_MODEL", raising=False)
    with pytest.raises(RuntimeError, match="set TOOLPATH_DEPTH_MODEL"):
        reconstruct_learned([np.zeros((8, 8, 3), np.uint8)])
    with pytest.raises(RuntimeError, match="not found"):
        reconstruct_learned([np.zeros((8, 8, 3), np.uint8)], model_path="/nonexistent/model")

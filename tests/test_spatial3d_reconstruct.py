"""reconstruct(): the backend dispatcher and its disk cache, on rendered views with known cameras."""

import numpy as np
import pytest

pytest.importorskip("cv2", reason="the classic backend needs OpenCV (pip install 'toolpath[spatial]')")

from conftest import ROOT

from toolpath.tools.spatial3d import QuestionImages as Scene
from toolpath.tools.spatial3d import reconstruct
from toolpath.tools.spatial3d.synthetic import direction_error_deg, random_pair, rotation_error_deg

ROOMS = [ROOT / "examples" / "assets" / "room_1.jpg", ROOT / "examples" / "assets" / "room_2.jpg"]


def test_rendered_pairs_come_back_with_their_true_poses():
    from toolpath.tools.spatial3d.classic import reconstruct_classic

    for seed in (1, 2, 3):
        views = random_pair(seed, 480, 360)
        recon = reconstruct_classic(views.images, intrinsics=[views.K, views.K])
        assert recon.registered.all(), recon.info
        assert rotation_error_deg(recon.extrinsics[1], views.extrinsics[1]) <= 2.0
        assert direction_error_deg(recon.extrinsics[1], views.extrinsics[1]) <= 5.0


def test_the_cache_is_keyed_by_image_content_and_a_bad_backend_is_named(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setenv("TOOLPATH_HOME", str(tmp_path / "home"))
    first = reconstruct(Scene(ROOMS))
    cached = list((tmp_path / "home" / "spatial3d").glob("classic-*.npz"))
    assert len(cached) == 1 and first.registered.all()
    renamed = [shutil.copy(p, tmp_path / f"copy_{i}.jpg") for i, p in enumerate(ROOMS)]
    again = reconstruct(Scene(renamed))  # same bytes under other names: read from the cache
    assert np.array_equal(again.extrinsics, first.extrinsics) and len(list(cached[0].parent.iterdir())) == 1
    with pytest.raises(ValueError, match="unknown reconstruction backend 'vggt'; expected one of classic, learned"):
        reconstruct(Scene(ROOMS), backend="vggt")
    with pytest.raises(ValueError, match="image file"):
        Scene([tmp_path / "missing.jpg"])


def test_an_unrelated_view_is_declined_not_guessed():
    from toolpath.tools.spatial3d.classic import reconstruct_classic

    views = random_pair(4, 480, 360)
    noise = (np.random.default_rng(0).random((360, 480, 3)) * 255).astype(np.uint8)
    recon = reconstruct_classic(views.images + [noise], intrinsics=[views.K] * 3)
    assert recon.registered.tolist() == [True, True, False]
    assert recon.confidence[2] == 0 and np.isnan(recon.extrinsics[2]).all()

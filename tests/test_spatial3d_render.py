"""Novel views: point splatting and mesh ray casting against scenes whose picture is known in advance."""

import numpy as np
import pytest

from toolpath.tools.spatial3d import Reconstruction, rotate_left, synthesize_novel_view, turn_around
from toolpath.tools.spatial3d.render import raycast_mesh, splat_points

K = np.array([[100.0, 0, 50], [0, 100.0, 40], [0, 0, 1]])


def square(z, color, half=1.0, n=60):
    g = np.linspace(-half, half, n)
    xs, ys = np.meshgrid(g, g)
    pts = np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, z)], axis=1)
    return np.hstack([pts, np.tile(color, (len(pts), 1))])


def test_points_land_where_the_pinhole_puts_them_and_near_hides_far():
    far = square(10.0, [0, 0, 1], half=6.0, n=150)  # blue wall, fills the view
    near = square(4.0, [1, 0, 0], half=0.4)  # red card in front of its centre
    img = splat_points(np.vstack([near, far]), np.eye(4), K, 100, 80)
    assert tuple(img[40, 50]) == (255, 0, 0)  # the principal point sees the near card
    assert tuple(img[5, 5]) == (0, 0, 255)  # the corner sees the wall
    # the card spans 0.4/4*100 = 10 px either side of the centre
    assert tuple(img[40, 58]) == (255, 0, 0) and tuple(img[40, 63]) == (0, 0, 255)


def test_points_behind_the_camera_are_not_drawn():
    img = splat_points(square(-5.0, [1, 0, 0]), np.eye(4), K, 100, 80)
    assert (img == 255).all()


def test_a_novel_view_turned_around_sees_what_was_behind():
    front = square(5.0, [1, 0, 0], half=2.0)
    behind = square(-5.0, [0, 1, 0], half=2.0)
    recon = Reconstruction(points=np.vstack([front, behind]), extrinsics=np.eye(4)[None], intrinsics=K[None],
                           image_sizes=[(100, 80)])
    ahead = np.asarray(synthesize_novel_view(recon, np.eye(4), 100, 80))
    back = np.asarray(synthesize_novel_view(recon, turn_around(np.eye(4)), 100, 80))
    assert tuple(ahead[40, 50]) == (255, 0, 0) and tuple(back[40, 50]) == (0, 255, 0)
    left = np.asarray(synthesize_novel_view(recon, rotate_left(np.eye(4), 90), 200, 160))
    assert (left == 255).all()  # nothing was seen to the left
    with pytest.raises(ValueError, match="width and height"):
        synthesize_novel_view(recon, np.eye(4), 2, 2)


def test_mesh_ray_casting_colours_what_the_rays_hit():
    pytest.importorskip("open3d", reason="mesh rendering needs open3d (pip install 'toolpath[spatial]')")
    V = np.array([[-1, -1, 5], [1, -1, 5], [1, 1, 5], [-1, 1, 5]], dtype=float)
    T = np.array([[0, 1, 2], [0, 2, 3]])
    C = np.tile([0.0, 1.0, 0.0], (4, 1))
    img = raycast_mesh(V, T, np.eye(4), K, 100, 80, vertex_colors=C)
    assert tuple(img[40, 50]) == (0, 255, 0)  # the quad covers ±20 px around the principal point
    assert tuple(img[40, 75]) == (255, 255, 255)
    shaded = raycast_mesh(V, T, np.eye(4), K, 100, 80)
    assert shaded[40, 50, 0] > 200 and shaded[40, 50, 0] == shaded[40, 50, 1]  # facing the camera: bright grey

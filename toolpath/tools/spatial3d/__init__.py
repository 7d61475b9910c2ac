"""pySpatial's API: programs over 3D reconstructions, camera poses and novel views.

    from toolpath.tools.spatial3d import *
    recon = reconstruct(scene)                               # Reconstruction: points, extrinsics, intrinsics
    describe_camera_motion(recon, 0, 1)                      # "camera 2 relative to camera 1: moved left, …"
    view = synthesize_novel_view(recon, rotate_left(recon.extrinsics[0], 90), 320, 240)

Extrinsics are world→camera 4x4 matrices in OpenCV axes (x right, y down, z forward); see poses.py for the
algebra and scene.py for the data. Heavy libraries (cv2, scipy, open3d) load only when used.
"""

from __future__ import annotations

import numpy as np

from .poses import (
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
from .reconstruct import reconstruct
from .scene import QuestionImages, Reconstruction

__all__ = ["QuestionImages", "Reconstruction", "reconstruct", "describe_camera_motion", "synthesize_novel_view",
           "camera_center", "rotate_left", "rotate_right", "move_forward", "move_backward", "turn_around",
           "relative_pose", "yaw_between"]


def synthesize_novel_view(recon: Reconstruction, pose, width: int = 320, height: int = 240, camera: int = 0):
    """What a camera at `pose` (world→camera 4x4) would see of the reconstruction, as a PIL image.

    The intrinsics are those of image `camera`, rescaled to width x height. Points nothing covers stay white:
    a view far from every photo shows mostly white, which is honest about what is known."""
    from PIL import Image

    from .render import intrinsics_for, splat_points

    if width < 8 or height < 8 or width > 4096 or height > 4096:
        raise ValueError(f"synthesize_novel_view: width and height must be 8..4096, got {width}x{height}")
    K = recon.intrinsics[camera]
    src = recon.image_sizes[camera] if recon.image_sizes else (int(round(2 * K[0, 2])), int(round(2 * K[1, 2])))
    img = splat_points(recon.points, np.asarray(pose, dtype=np.float64), intrinsics_for(K, src, (width, height)),
                       width, height)
    return Image.fromarray(img)

"""pySpatial's operations (toolpath/tools/spatial3d) as tools, for tool-calling models that do not write programs:
`reconstruct`, `camera_motion`, `novel_view` on named images (image_1, …).

They run the classic backend (OpenCV SIFT, essential matrix, PnP, bundle adjustment: reconstruct.py) on the
images as they are; the reconstruction is cached under $TOOLPATH_HOME/spatial3d keyed by the images' bytes
(spatial3d/reconstruct.py), and its id (`recon_` + the cache key) lets a later call, in this run or another process,
reuse it (`novel_view`).
Units: camera 1 is the world origin (x right, y down, z forward, OpenCV) and the distance between the first two
cameras is 1; a turn's sign is positive to the left, seen from above.

Without the camera's field of view the focal length is COLMAP's prior (about 45° across the longer side): the
direction of a turn and of a move comes out right, its size in degrees less so (a wide-angle camera's turns are
over-stated); give `fov_deg` when it is known. Views the backend cannot place are declined, never guessed.
This module imports numpy and the backend only inside the tools (`toolpath tools list` stays light).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from .image.ops import image_result, open_image
from .registry import ToolContext, ToolError, ToolResult, tool

BACKEND = "classic"
_ID = re.compile(r"^recon_([0-9a-f]{12,32})$")


def _require_backend() -> None:
    try:
        import cv2  # noqa: F401
        import scipy  # noqa: F401
    except ImportError as err:
        raise ToolError(f"reconstruction needs OpenCV and SciPy, which are not installed here ({err.name}); "
                        "pip install 'toolpath[spatial]'") from None


def _paths(ctx: ToolContext, names: list[str], what: str) -> list[Path]:
    if not names:
        raise ToolError(f"{what}: name at least one image")
    if len(set(names)) != len(names):
        raise ToolError(f"{what}: an image is named twice ({', '.join(names)})")
    for n in names:
        open_image(ctx, n)  # an unknown name or an unreadable file is an error naming it
    return [Path(ctx.images[ctx.image_name(n)]) for n in names]


def _intrinsics(paths: list[Path], fov_deg: float | None):
    if fov_deg is None:
        return None
    if not 10.0 <= fov_deg <= 150.0:
        raise ToolError(f"fov_deg must be between 10 and 150 degrees, got {fov_deg:g}")
    import numpy as np
    from PIL import Image

    Ks = []
    for p in paths:
        with Image.open(p) as im:
            w, h = im.size
        f = (max(w, h) / 2) / math.tan(math.radians(fov_deg) / 2)
        Ks.append(np.array([[f, 0.0, (w - 1) / 2], [0.0, f, (h - 1) / 2], [0.0, 0.0, 1.0]]))
    return Ks


def _reconstruct(paths: list[Path], fov_deg: float | None):
    """(reconstruction, its id) from the cache or the classic backend."""
    from .spatial3d.reconstruct import cache_key, reconstruct
    from .spatial3d.scene import QuestionImages

    _require_backend()
    scene = QuestionImages(paths)
    Ks = _intrinsics(paths, fov_deg)
    options: dict[str, Any] = {} if Ks is None else {"intrinsics": [K.tolist() for K in Ks]}
    recon = reconstruct(scene, backend=BACKEND, **options)
    return recon, "recon_" + cache_key(scene, BACKEND, options)


def _load(recon_id: str):
    from ..paths import home
    from .spatial3d.scene import Reconstruction

    m = _ID.match(recon_id.strip())
    if not m:
        raise ToolError(f"reconstruction {recon_id!r} is not an id that reconstruct returns (recon_ and hex digits)")
    hits = sorted((home() / "spatial3d").glob(f"{BACKEND}-{m.group(1)}*.npz"))
    if not hits:
        raise ToolError(f"unknown reconstruction {recon_id!r}: call reconstruct on the images first")
    return Reconstruction.load(hits[0])


def _declined(recon, names: list[str]) -> list[dict]:
    why = recon.info.get("declined") or {}
    return [{"image": n, "why": str(why.get(str(i), why.get(i, "no pose could be recovered")))}
            for i, n in enumerate(names) if not recon.registered[i]]


def _turn_words(yaw: float) -> str:
    return ("no significant turn" if abs(yaw) < 15
            else f"turned {'left' if yaw > 0 else 'right'} by about {abs(yaw):.0f}°")


@tool(timeout=240.0, cost=3.0, quality=0.7, tags=("spatial", "3d"))
def reconstruct(images: list[str], ctx: ToolContext, fov_deg: float | None = None) -> ToolResult:
    """Reconstruct the 3D scene seen in several images: which camera poses were recovered, how each camera moved and
    turned from the first, the point cloud's size, and an id to reuse in novel_view.

    Args:
        images: the images' names, e.g. ["image_1", "image_2"]; at least two views of one scene
        fov_deg: the cameras' field of view across the longer image side, in degrees, if known
    """
    if len(images) < 2:
        raise ToolError(f"images: reconstruction needs at least two views of the scene, got {len(images)}")
    paths = _paths(ctx, images, "images")
    recon, recon_id = _reconstruct(paths, fov_deg)
    from .spatial3d.poses import camera_center, describe_camera_motion, yaw_between

    cameras = []
    base = next((i for i in range(len(images)) if recon.registered[i]), None)
    for i, name in enumerate(images):
        if not recon.registered[i]:
            continue
        entry: dict[str, Any] = {"image": name,
                                 "position": [round(float(c), 3) for c in camera_center(recon.extrinsics[i])]}
        if i != base:
            text = describe_camera_motion(recon, base, i)
            entry["from_" + images[base]] = text.split(": ", 1)[1]
            entry["yaw_deg"] = round(yaw_between(recon.extrinsics[base], recon.extrinsics[i]), 1)
        cameras.append(entry)
    data = {"id": recon_id, "points": int(len(recon.points)), "cameras": cameras,
            "declined": _declined(recon, images),
            "frame": f"{images[base]} at the origin, x right, y down, z forward; first baseline = 1" if base is not None
            else "no camera pose could be recovered"}
    return ToolResult(content=_json(data), data=data)


@tool(timeout=240.0, cost=2.0, quality=0.75, tags=("spatial", "3d"))
def camera_motion(image_a: str, image_b: str, ctx: ToolContext, fov_deg: float | None = None) -> ToolResult:
    """How the camera moved and turned from one photo to another: turned left or right by how many degrees, and which
    way it moved (forward, left, backward-right, ...).

    Args:
        image_a: the first photo's name, e.g. image_1
        image_b: the second photo's name, e.g. image_2
        fov_deg: the camera's field of view across the longer image side, in degrees, if known
    """
    if image_a == image_b:
        raise ToolError(f"image_a and image_b are the same image ({image_a})")
    paths = _paths(ctx, [image_a, image_b], "camera_motion")
    recon, recon_id = _reconstruct(paths, fov_deg)
    if not recon.registered.all():
        reasons = "; ".join(dict.fromkeys(d["why"] for d in _declined(recon, [image_a, image_b])))
        raise ToolError(f"camera_motion: {image_a} and {image_b} could not be placed relative to each other "
                        f"({reasons})")
    import numpy as np

    from .spatial3d.poses import camera_center, describe_camera_motion, relative_pose, yaw_between

    Ea, Eb = recon.extrinsics
    yaw = yaw_between(Ea, Eb)
    R = relative_pose(Ea, Eb)[:3, :3]
    rotation = math.degrees(math.acos(max(-1.0, min(1.0, (float(np.trace(R)) - 1) / 2))))
    step = Ea[:3, :3] @ (camera_center(Eb) - camera_center(Ea))  # in image_a's camera axes
    norm = float(np.linalg.norm(step))
    text = describe_camera_motion(recon, 0, 1).split(": ", 1)[1]
    data = {"motion": text, "turn": "none" if abs(yaw) < 15 else ("left" if yaw > 0 else "right"),
            "yaw_deg": round(yaw, 1), "rotation_deg": round(rotation, 1),
            "move_direction": [round(float(c) / norm, 3) for c in step] if norm > 0 else [0.0, 0.0, 0.0],
            "axes": f"{image_a}'s camera: x right, y down, z forward; yaw positive to the left",
            "reconstruction": recon_id,
            "focal": "given" if fov_deg is not None else "guessed (about 45° field of view)"}
    return ToolResult(content=_json(data), data=data)


@tool(timeout=60.0, cost=0.5, quality=0.6, tags=("spatial", "3d"))
def novel_view(reconstruction: str, ctx: ToolContext, camera: int = 1, turn_deg: float = 0.0, forward: float = 0.0,
               width: int = 320, height: int = 240) -> ToolResult:
    """Render what a camera would see from a new pose in a reconstructed scene: start at one of its cameras, turn
    (positive = left), move forward (negative = back). The view comes back as a new named image; white is what no photo
    showed.

    Args:
        reconstruction: the id reconstruct returned, e.g. recon_3f2a…
        camera: which photo's camera to start from, 1 for the first image reconstructed
        turn_deg: how far to turn in place, -180 to 180 degrees; positive turns left
        forward: how far to move along the new viewing direction, in units of the first two cameras' distance, -10 to 10
        width: the view's width in pixels, 16 to 1024
        height: the view's height in pixels, 16 to 1024
    """
    if not -180.0 <= turn_deg <= 180.0:
        raise ToolError(f"turn_deg must be between -180 and 180, got {turn_deg:g}")
    if not -10.0 <= forward <= 10.0:
        raise ToolError(f"forward must be between -10 and 10, got {forward:g}")
    for what, v in (("width", width), ("height", height)):
        if not 16 <= v <= 1024:
            raise ToolError(f"{what} must be between 16 and 1024 pixels, got {v}")
    recon = _load(reconstruction)
    if not 1 <= camera <= len(recon):
        raise ToolError(f"camera must be between 1 and {len(recon)} (the reconstruction's images), got {camera}")
    if not recon.registered[camera - 1]:
        raise ToolError(f"camera {camera}'s pose was not recovered; start from one of "
                        f"{[i + 1 for i in range(len(recon)) if recon.registered[i]]}")
    import numpy as np

    from .spatial3d import synthesize_novel_view
    from .spatial3d.poses import move_forward, rotate_left

    pose = move_forward(rotate_left(recon.extrinsics[camera - 1], turn_deg), forward)
    im = synthesize_novel_view(recon, pose, width, height, camera=camera - 1)
    a = np.asarray(im)
    covered = float((a < 250).any(axis=2).mean())
    words = (f"from camera {camera}, turned {'left' if turn_deg >= 0 else 'right'} {abs(turn_deg):g}°, "
             f"moved {forward:g} forward; {covered:.0%} of the view shows reconstructed points")
    return image_result(ctx, "view", im, words)


def _json(data: dict) -> str:
    import json

    return json.dumps(data, ensure_ascii=False)

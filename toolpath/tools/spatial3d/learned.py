"""The `learned` backend: a feed-forward depth model per image (transformers), lifted to 3D with the cameras.

Weights come from a local folder only (`model_path=` or $TOOLPATH_DEPTH_MODEL): any transformers
depth-estimation model (Depth Anything, DPT, …) saved with its image processor. Without one, the backend says
so and does not run; nothing is downloaded.

Cameras: with one image, the camera is the world (identity). With more, the poses come from the classic backend
(SIFT + PnP + bundle adjustment), and each view's depth is scaled to the classic points it sees (median ratio),
so the dense points of all views share one scale. A relative model predicts inverse depth (disparity); a
metric one (config `depth_estimation_type: metric`) predicts depth in metres, which is then kept as it is for a
single image.
"""

from __future__ import annotations

import os

import numpy as np

from ...loaded_once import LoadedOnce
from ...quiet import quiet_model_loading
from .scene import Reconstruction

MODEL_ENV = "TOOLPATH_DEPTH_MODEL"
_MODELS = LoadedOnce("depth models")  # path -> (model, processor, metric): loading is the slow part


def default_intrinsics(width: int, height: int) -> np.ndarray:
    """A pinhole guess when the images carry none: a ~60° horizontal field of view, centred."""
    f = 0.87 * max(width, height)
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]])


def _load(path: str):
    return _MODELS.get(path, lambda: _read(path))


def _read(path: str):
    try:
        import torch  # noqa: F401  (fail here, with the message below, when it is missing)
        from transformers import AutoImageProcessor, AutoModelForDepthEstimation
    except ImportError as err:
        raise RuntimeError(f"the learned backend needs torch and transformers: {err} "
                           "(pip install 'toolpath[local]')") from None
    if not os.path.isdir(path):
        raise RuntimeError(f"depth model folder not found: {path}")
    quiet_model_loading()
    try:
        model = AutoModelForDepthEstimation.from_pretrained(path).eval()
        processor = AutoImageProcessor.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise RuntimeError(f"cannot load a depth-estimation model from {path}: {err}") from None
    metric = getattr(model.config, "depth_estimation_type", "relative") == "metric"
    return model, processor, metric


def predict_depth(model, processor, image: np.ndarray, metric: bool) -> np.ndarray:
    """Depth (H, W) at the image's own size: positive, larger = farther. Disparity output is inverted and
    normalised to a median depth of 1 (its scale is unknown anyway)."""
    import torch

    h, w = image.shape[:2]
    inputs = processor(images=[image], return_tensors="pt")
    with torch.inference_mode():
        out = model(**inputs).predicted_depth  # (1, h', w')
    out = torch.nn.functional.interpolate(out[:, None].float(), size=(h, w), mode="bilinear", align_corners=False)
    pred = out[0, 0].numpy().astype(np.float64)
    if metric:
        return np.clip(pred, 1e-3, None)
    disp = np.clip(pred - pred.min(), 0, None) + 1e-3 * (np.ptp(pred) + 1e-6)  # shift so the farthest is > 0
    depth = 1.0 / disp
    return depth / np.median(depth)


def backproject(depth: np.ndarray, K: np.ndarray, E: np.ndarray, image: np.ndarray, step: int) -> np.ndarray:
    """World points (M, 6) of every `step`-th pixel: x_cam = depth · K⁻¹ [u, v, 1], x_world = E⁻¹ x_cam."""
    h, w = depth.shape
    v, u = np.mgrid[0:h:step, 0:w:step]
    z = depth[v, u].ravel()
    pix = np.stack([u.ravel() + 0.0, v.ravel() + 0.0, np.ones(z.size)])
    cam = (np.linalg.inv(K) @ pix) * z
    Einv = np.linalg.inv(E)
    world = (Einv[:3, :3] @ cam + Einv[:3, 3:4]).T
    rgb = image[v, u].reshape(-1, 3) / 255.0
    return np.hstack([world, rgb])


def _align_scale(depth: np.ndarray, K, E, points: np.ndarray) -> float | None:
    """The factor that makes this view's predicted depth agree with the classic points it sees (median)."""
    if len(points) == 0:
        return None
    cam = points[:, :3] @ E[:3, :3].T + E[:3, 3]
    cam = cam[cam[:, 2] > 1e-6]
    uv = cam @ K.T
    u, v = np.round(uv[:, 0] / uv[:, 2]).astype(int), np.round(uv[:, 1] / uv[:, 2]).astype(int)
    h, w = depth.shape
    ok = (u >= 0) & (u < w) & (v >= 0) & (v < h)
    if ok.sum() < 10:
        return None
    return float(np.median(cam[ok, 2] / depth[v[ok], u[ok]]))


def reconstruct_learned(images: list[np.ndarray], model_path: str | None = None, intrinsics=None,
                        max_points: int = 200_000, **classic_options) -> Reconstruction:
    path = model_path or os.environ.get(MODEL_ENV)
    if not path:
        raise RuntimeError(f"the learned backend needs depth-model weights on this machine: set {MODEL_ENV} to a "
                           f"transformers depth-estimation model folder (or pass model_path); nothing is downloaded")
    if not images:
        raise ValueError("reconstruct: no images")
    model, processor, metric = _load(path)
    sizes = [(im.shape[1], im.shape[0]) for im in images]
    Ks = [np.asarray(k, dtype=np.float64) for k in intrinsics] if intrinsics is not None else \
        [default_intrinsics(w, h) for w, h in sizes]
    if len(images) == 1:
        extrinsics, confidence, sparse, info = np.eye(4)[None], np.ones(1), np.zeros((0, 6)), {}
    else:
        from .classic import reconstruct_classic

        base = reconstruct_classic(images, intrinsics=Ks, **classic_options)
        extrinsics, confidence, sparse, info = base.extrinsics, base.confidence, base.points, {"classic": base.info}
        Ks = list(base.intrinsics)
    step = max(1, int(np.ceil(np.sqrt(sum(w * h for w, h in sizes) / max_points))))
    clouds, scales = [], []
    for im, K, E, ok in zip(images, Ks, extrinsics, np.isfinite(extrinsics).all(axis=(1, 2))):
        if not ok:
            scales.append(None)
            continue
        depth = predict_depth(model, processor, im, metric)
        s = _align_scale(depth, K, E, sparse) if len(images) > 1 else None
        scales.append(s)
        clouds.append(backproject(depth * (s or 1.0), K, E, im, step))
    points = np.vstack(clouds) if clouds else np.zeros((0, 6))
    return Reconstruction(points=points, extrinsics=extrinsics, intrinsics=np.stack(Ks), confidence=confidence,
                          image_sizes=sizes, backend="learned",
                          info={**info, "model": path, "metric": metric, "depth_scales": scales, "pixel_step": step})

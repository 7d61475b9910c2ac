"""reconstruct(scene): the 3D reconstruction of a scene's images, by a named backend, cached on disk.

Backends:
    classic   OpenCV SIFT, essential matrix, PnP, triangulation, bundle adjustment (offline default)
    learned   a feed-forward depth / point-map model from a local weights path, through transformers

The cache lives under $TOOLPATH_HOME/spatial3d/, keyed by the images' bytes, the backend and its options:
the same images are reconstructed once, whatever their file names.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path

import numpy as np

from ...paths import home
from .scene import QuestionImages, Reconstruction

BACKENDS = {"classic": "toolpath.tools.spatial3d.classic:reconstruct_classic",
            "learned": "toolpath.tools.spatial3d.learned:reconstruct_learned"}
CACHE_VERSION = 1  # bump when a backend's output changes for the same input


def cache_key(scene: QuestionImages, backend: str, options: dict) -> str:
    h = hashlib.sha256(json.dumps([CACHE_VERSION, backend, options], sort_keys=True, default=str).encode())
    for p in scene.images:
        h.update(hashlib.sha256(Path(p).read_bytes()).digest())
    return h.hexdigest()[:32]


def load_images(scene: QuestionImages) -> list[np.ndarray]:
    from PIL import Image

    out = []
    for p in scene.images:
        try:
            with Image.open(p) as im:
                out.append(np.asarray(im.convert("RGB")))
        except OSError as err:
            raise ValueError(f"cannot read image {p}: {err}") from None
    return out


def reconstruct(scene: QuestionImages, backend: str = "classic", cache: bool = True, **options) -> Reconstruction:
    """The reconstruction of `scene` by `backend` (see BACKENDS), from the cache when it has been made before."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown reconstruction backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    path = home() / "spatial3d" / f"{backend}-{cache_key(scene, backend, options)}.npz"
    if cache and path.is_file():
        try:
            return Reconstruction.load(path)
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache file is rebuilt below
    module, _, attr = BACKENDS[backend].partition(":")
    recon = getattr(importlib.import_module(module), attr)(load_images(scene), **options)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        recon.save(tmp)
        os.replace(tmp, path)  # a parallel process sees the old file or the whole new one
    return recon

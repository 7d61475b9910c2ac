"""QuestionImages and Reconstruction: the data pySpatial programs work on.

Conventions (OpenCV): camera x right, y down, z forward. `extrinsics[i]` maps world to camera i
(x_cam = R x_world + t, as a 4x4 [R t; 0 1]); `intrinsics[i]` is the 3x3 K of image i in its own pixels.
The world frame is that of the first camera unless a backend says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class QuestionImages:
    """The images of one question (paths, in the order the question names them) and the question itself."""

    images: list[Path]
    question: str = ""

    def __post_init__(self) -> None:
        self.images = [Path(p) for p in self.images]
        if not self.images:
            raise ValueError("QuestionImages: at least one image is needed")
        missing = [str(p) for p in self.images if not p.is_file()]
        if missing:
            raise ValueError(f"QuestionImages: image file(s) not found: {', '.join(missing)}")


@dataclass
class Reconstruction:
    """Points (N,3) or (N,6) with RGB in 0..1, and one camera per image.

    `confidence[i]` says how much pose i is to be trusted (for the classic backend: the inliers that
    support it; 0 for a pose it could not recover, whose extrinsics are then NaN). `registered[i]` is False
    for such a pose, so a program can decline instead of reasoning from a guess."""

    points: np.ndarray
    extrinsics: np.ndarray
    intrinsics: np.ndarray
    confidence: np.ndarray = field(default=None)  # type: ignore[assignment]
    image_sizes: list[tuple[int, int]] = field(default_factory=list)  # (width, height) per image
    backend: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.points = np.asarray(self.points, dtype=np.float64).reshape(
            -1, np.shape(self.points)[-1] if np.size(self.points) else 3)
        self.extrinsics = np.asarray(self.extrinsics, dtype=np.float64)
        self.intrinsics = np.asarray(self.intrinsics, dtype=np.float64)
        n = len(self.extrinsics)
        if self.points.shape[1] not in (3, 6):
            raise ValueError(f"Reconstruction: points must be (N,3) or (N,6), got {self.points.shape}")
        if self.extrinsics.shape != (n, 4, 4) or self.intrinsics.shape != (n, 3, 3):
            raise ValueError(f"Reconstruction: extrinsics (N,4,4) and intrinsics (N,3,3) for the same N, got "
                             f"{self.extrinsics.shape} and {self.intrinsics.shape}")
        if self.confidence is None:
            self.confidence = np.ones(n)
        self.confidence = np.asarray(self.confidence, dtype=np.float64)

    @property
    def registered(self) -> np.ndarray:
        return np.isfinite(self.extrinsics).all(axis=(1, 2)) & (self.confidence > 0)

    def __len__(self) -> int:
        return len(self.extrinsics)

    def save(self, path: Path) -> None:
        import json

        np.savez_compressed(path, points=self.points, extrinsics=self.extrinsics, intrinsics=self.intrinsics,
                            confidence=self.confidence,
                            image_sizes=np.asarray(self.image_sizes, dtype=np.int64).reshape(-1, 2),
                            meta=np.frombuffer(json.dumps({"backend": self.backend, "info": self.info},
                                                          default=str).encode(), dtype=np.uint8))

    @classmethod
    def load(cls, path: Path) -> Reconstruction:
        import json

        with np.load(path) as z:
            meta = json.loads(z["meta"].tobytes().decode())
            return cls(points=z["points"], extrinsics=z["extrinsics"], intrinsics=z["intrinsics"],
                       confidence=z["confidence"], image_sizes=[tuple(map(int, s)) for s in z["image_sizes"]],
                       backend=meta["backend"], info=meta["info"])

"""Policy kind `oracle`: FSD's answers from the robot simulator's ground truth (embodied agent; tests the pipeline).

It declares `observes = ("image", "truth")`, so the embodied agent hands it the scene truth with each question
(SceneObservation.truth: {"index", "name", "kind", "color", "box" in grid1000} per object) and the
segmentation image (pixel value = index + 1 of the object seen there, 0 elsewhere; 16-bit or 8-bit PNG). Each
object's mask is exactly its segmentation label, so every point it gives lies on the object it names, and its
boxes are the truth's. How the answers are made from the masks: fsd_scene.py.

An object named by the task that is absent from the truth, or listed but hidden in the segmentation, is
answered in words (no coordinates), as are a missing or unreadable image.
"""

from __future__ import annotations

import math
from typing import Any

from ..policies.base import Response
from ..state import Message
from . import fsd_scene as S


def scene_from_truth(prompt: S.Prompt) -> S.Scene:
    """The Scene of the truth lines, each object's mask its label in the segmentation image."""
    rgb = S.load_rgb(prompt.images[0] if prompt.images else None)
    h, w = rgb.shape[:2]
    if not prompt.truth:
        why = "; ".join(prompt.truth_issues) if prompt.truth_issues else "the message has no 'Scene truth:' lines"
        raise S.Unanswerable(f"the oracle needs the scene truth: {why}")
    labels = S.load_labels(prompt.images[1] if len(prompt.images) > 1 else None, (h, w))
    objects, hidden = [], []
    for t in prompt.truth:
        mask = labels == t["index"] + 1
        ref = S.object_ref(t["name"])
        color = t.get("color") if isinstance(t.get("color"), str) else ref.color
        kind = S.KINDS.get(str(t.get("kind")), ref.kind)
        if not mask.any():
            hidden.append(t["name"])
            continue
        box = t.get("box")
        ok = (isinstance(box, list) and len(box) == 4 and all(isinstance(c, (int, float)) and not isinstance(c, bool)
                                                               and math.isfinite(c) for c in box))
        objects.append(S.SceneObject(name=t["name"], color=color, kind=kind, mask=mask, grid_box=box if ok else None))
    missing = f"Listed in the truth but not visible in the segmentation: {', '.join(hidden)}." if hidden else ""
    return S.Scene(w, h, objects, source="the scene truth and segmentation", missing=missing)


class OraclePolicy:
    """FSD answers from the scene truth and the segmentation: exact."""

    name = "oracle"
    observes = ("image", "truth")

    def __init__(self, spec: Any = None):
        self.spec = spec

    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response:
        return S.respond(messages, scene_from_truth, generation.get("observation"))

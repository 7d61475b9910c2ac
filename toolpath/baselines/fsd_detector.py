"""Policy kind `detector`: FSD's answers from a colour/shape detector of the simulated tabletop objects.

It sees only the rgb image (`observes = ("image",)`). How it finds the objects (saturated colours on a grey
table, cubes told from plates by the size and shape of their blobs): toolpath/tools/fsd/detect.py.
Objects are named "<color> <kind>"; the instruction's objects are matched by colour and kind ("block" is a
cube, "dish" a plate). An object it cannot find, or two that match, is said in words, with no coordinates:
never a guess. The answers themselves are made from the masks as the oracle makes them (fsd_scene.py).

Options (ModelSpec.options): min_saturation (0-1, default MIN_SATURATION), min_value (0-1), plate_area (a camera
much nearer or farther than the sandbox's needs it set, e.g. {"plate_area": 0.01}) and min_area (fractions of
the image area).
"""

from __future__ import annotations

from typing import Any

from ..policies.base import PolicyError, Response
from ..state import Message

# The segmentation itself lives with the tools (the spatial tools see the scene through it too); its names are
# re-exported here, where the detector's callers and tests know them.
from ..tools.fsd.detect import (  # noqa: F401
    FLAT_RATIO,
    HUE_TOLERANCE,
    HUES,
    MERGE_GAP,
    MIN_AREA,
    MIN_SATURATION,
    MIN_VALUE,
    PALETTE,
    PLATE_AREA,
    SIZE_CLEAR,
    Blob,
    blobs,
    color_masks,
    components,
    detect_scene,
    hsv,
    kind_of,
)
from . import fsd_scene as S


class DetectorPolicy:
    """FSD answers from colour segmentation and blob size of the rgb image alone."""

    name = "detector"
    observes = ("image",)

    def __init__(self, spec: Any = None):
        self.spec = spec
        opts = dict(getattr(spec, "options", None) or {})
        defaults = {"min_saturation": MIN_SATURATION, "min_value": MIN_VALUE, "plate_area": PLATE_AREA,
                    "min_area": MIN_AREA}
        unknown = sorted(set(opts) - set(defaults))
        if unknown:
            raise PolicyError(f"detector: unknown option(s) {', '.join(unknown)}; expected {', '.join(defaults)}")
        for key, default in defaults.items():
            v = opts.get(key, default)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise PolicyError(f"detector: option {key} must be a number between 0 and 1, got {v!r}")
            setattr(self, key, float(v))

    def kind_of(self, blob: Blob, width: int, height: int) -> str:
        """"plate" or "cube" by tools.fsd.detect.kind_of with this policy's `plate_area`."""
        return kind_of(blob, width, height, self.plate_area)

    def scene(self, prompt: S.Prompt) -> S.Scene:
        rgb = S.load_rgb(prompt.images[0] if prompt.images else None)
        return detect_scene(rgb, self.min_saturation, self.min_value, self.plate_area, self.min_area)

    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response:
        return S.respond(messages, self.scene, generation.get("observation"))

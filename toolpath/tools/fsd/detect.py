"""Finding the simulated tabletop's objects in an rgb image by colour and shape: "<color> cube" / "<color> plate".

The scene's objects are saturated colours on a grey table, under a white/grey/black robot, so:
  1. colour: each pixel's HSV; saturation and value above thresholds (the table, the floor, the robot and
     shadows are nearly grey), hue within HUE_TOLERANCE of one of the six colours' hues (computed from the
     RGB values the sandbox sets: red 0°, orange 28°, yellow 52°, green 126°, blue 227°, purple 276°);
  2. per colour: a 1-pixel opening (drops specks and the mixed-colour fringe where two colours meet), then
     8-connected components; fragments of one colour close together are merged (an arm or a cube standing on
     a plate can cut a plate in two), and small holes closed (highlights);
  3. kind: a plate is a flat disc of radius 0.07 m, a cube has 0.045 m edges. Seen by the sandbox's camera
     (0.86 m away, 46° down, 45° vertical field) a plate's convex hull covers 1.29-2.01% of the image and is
     wider than tall (height/width 0.79-0.93: a disc seen obliquely), a cube's 0.29-0.50% and taller than wide
     (1.03-1.38: its sides show); measured on seeds 0-99's scenes, the arm at home.
     Two votes: size (hull share >= `plate_area`, default PLATE_AREA) and shape (height/width < FLAT_RATIO);
     when they disagree, a size far from the threshold wins, else the shape. A camera much nearer or farther
     than the sandbox's needs `plate_area` set.
The detector policy (baselines.fsd_detector) and the spatial tools (tools.py) both see the scene through
`detect_scene`.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np

from ...sandboxes.robot_scene import COLORS as SCENE_COLORS
from . import masks as M
from .scene import Scene, SceneObject

# The RGB values the simulated scene gives each colour (sandboxes.robot_scene); their hues are the class centres.
PALETTE = {name: rgba[:3] for name, rgba in SCENE_COLORS.items()}
HUES = {c: colorsys.rgb_to_hsv(*rgb)[0] * 360.0 for c, rgb in PALETTE.items()}
HUE_TOLERANCE = 14.0  # degrees: orange sits 28° from red and 24° from yellow
MIN_SATURATION = 0.35
MIN_VALUE = 0.12
PLATE_AREA = 0.008  # hull area / image area at or above which a blob is a plate (the two sizes' geometric mean)
SIZE_CLEAR = 1.4  # a hull this factor above (below) plate_area is a plate (cube) whatever its shape
FLAT_RATIO = 1.0  # height / width below which a blob is seen flattened, as a disc on the table is
MIN_AREA = 0.0003  # blobs smaller than this share of the image are specks, not objects
MERGE_GAP = 0.03  # fragments of one colour closer than this share of the image diagonal are one object


@dataclass
class Blob:
    color: str
    mask: np.ndarray
    hull_area: int

    @property
    def area(self) -> int:
        return int(self.mask.sum())


def hsv(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hue in degrees [0, 360), saturation and value in [0, 1], per pixel."""
    x = rgb.astype(np.float32) / 255.0
    mx, mn = x.max(axis=2), x.min(axis=2)
    c = mx - mn
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    safe = np.where(c > 0, c, 1.0)
    h = np.where(mx == r, ((g - b) / safe) % 6.0, np.where(mx == g, (b - r) / safe + 2.0, (r - g) / safe + 4.0))
    h = np.where(c > 0, h * 60.0, 0.0)
    s = np.where(mx > 0, c / np.where(mx > 0, mx, 1.0), 0.0)
    return h, s, mx


def color_masks(rgb: np.ndarray, min_saturation: float, min_value: float) -> dict[str, np.ndarray]:
    h, s, v = hsv(rgb)
    colored = (s >= min_saturation) & (v >= min_value)
    names = list(HUES)
    dist = np.stack([np.abs((h - HUES[c] + 180.0) % 360.0 - 180.0) for c in names])
    nearest = dist.argmin(axis=0)
    ok = colored & (dist.min(axis=0) <= HUE_TOLERANCE)
    return {c: ok & (nearest == i) for i, c in enumerate(names)}


def components(mask: np.ndarray) -> list[np.ndarray]:
    """8-connected components of a mask, as masks, largest first (runs per row joined by union-find)."""
    runs: list[tuple[int, int, int]] = []  # (row, start, end exclusive)
    parent: list[int] = []

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    prev: list[int] = []
    for v in range(mask.shape[0]):
        row = mask[v]
        if not row.any():
            prev = []
            continue
        d = np.diff(np.concatenate(([0], row.view(np.int8), [0])))
        starts, ends = np.nonzero(d == 1)[0], np.nonzero(d == -1)[0]
        cur = []
        j = 0
        for a, b in zip(starts.tolist(), ends.tolist()):
            k = len(runs)
            runs.append((v, a, b))
            parent.append(k)
            cur.append(k)
            # previous-row runs touching [a-1, b] (8-connectivity); both lists are sorted by start
            while j < len(prev) and runs[prev[j]][2] < a:
                j += 1
            i = j
            while i < len(prev) and runs[prev[i]][1] <= b:
                ra, rb = find(prev[i]), find(k)
                if ra != rb:
                    parent[rb] = ra
                i += 1
        prev = cur
    groups: dict[int, list[int]] = {}
    for k in range(len(runs)):
        groups.setdefault(find(k), []).append(k)
    out = []
    for members in groups.values():
        m = np.zeros(mask.shape, bool)
        for k in members:
            v, a, b = runs[k]
            m[v, a:b] = True
        out.append(m)
    out.sort(key=lambda m: -int(m.sum()))
    return out


def _gap(a: np.ndarray, b: np.ndarray) -> float:
    """Distance between two masks' bounding boxes (0 when they overlap)."""
    au0, av0, au1, av1 = M.bbox(a)
    bu0, bv0, bu1, bv1 = M.bbox(b)
    du = max(0, bu0 - au1, au0 - bu1)
    dv = max(0, bv0 - av1, av0 - bv1)
    return float(np.hypot(du, dv))


def blobs(rgb: np.ndarray, min_saturation: float = MIN_SATURATION, min_value: float = MIN_VALUE,
          min_area: float = MIN_AREA) -> list[Blob]:
    """The coloured objects in the image: one blob per object (fragments of a colour merged), largest first."""
    h, w = rgb.shape[:2]
    floor = max(8, int(min_area * h * w))
    max_gap = MERGE_GAP * float(np.hypot(w, h))
    out = []
    for color, mask in color_masks(rgb, min_saturation, min_value).items():
        if not mask.any():
            continue
        mask = M.dilate(M.erode(mask, 1), 1)
        parts = [m for m in components(mask) if m.sum() >= max(4, floor // 4)]
        merged: list[np.ndarray] = []
        for m in parts:  # largest first: each fragment joins the first object near enough
            for i, big in enumerate(merged):
                if _gap(big, m) <= max_gap:
                    merged[i] = big | m
                    break
            else:
                merged.append(m)
        for m in merged:
            if m.sum() < floor:
                continue
            m = m | (M.erode(M.dilate(m, 2), 2) & M.convex_hull(m))  # close highlights' holes, not concavities
            out.append(Blob(color, m, int(M.convex_hull(m).sum())))
    out.sort(key=lambda b: -b.area)
    return out



def kind_of(blob: Blob, width: int, height: int, plate_area: float = PLATE_AREA) -> str:
    """"plate" or "cube" from two votes: size (hull area against `plate_area`) and shape (a plate's disc is
    seen flattened, wider than tall; a cube's sides make it taller than wide). When they disagree, size wins
    if it is clear (a factor of SIZE_CLEAR from the threshold), else shape does."""
    share = blob.hull_area / float(width * height)
    big = share >= plate_area
    u0, v0, u1, v1 = M.bbox(blob.mask)
    flat = (v1 - v0 + 1) / (u1 - u0 + 1) < FLAT_RATIO
    if big == flat or not SIZE_CLEAR > share / plate_area > 1 / SIZE_CLEAR:
        return "plate" if big else "cube"
    return "plate" if flat else "cube"


SOURCE = "colour segmentation of the image"
MISSING = "The detector finds objects by colour and tells cubes from plates by size and shape."


def detect_scene(rgb: np.ndarray, min_saturation: float = MIN_SATURATION, min_value: float = MIN_VALUE,
                 plate_area: float = PLATE_AREA, min_area: float = MIN_AREA) -> Scene:
    """The Scene of an HxWx3 uint8 image: one object per coloured blob, named "<color> <kind>"."""
    h, w = rgb.shape[:2]
    objects = []
    for b in blobs(rgb, min_saturation, min_value, min_area):
        kind = kind_of(b, w, h, plate_area)
        objects.append(SceneObject(name=f"{b.color} {kind}", color=b.color, kind=kind, mask=b.mask))
    return Scene(w, h, objects, source=SOURCE, missing=MISSING)

"""FSD's tabletop scene in image pixels: named objects (each a boolean mask), and what FSD's answers are made of.

Everything here is in image pixels (u right, v down); the only conversion to FSD's 0-1000 grid is
coords.CoordinateSpace (`grid`, `grid_box`). Where the objects come from is up to the caller: the simulator's
segmentation (baselines.fsd_oracle), colour and shape in the rgb image (detect.py), and both the FSD offline
policies (baselines.fsd_scene) and the spatial tools (tools.py) answer from the same geometry:

    grasp point   a cube's top-face centre as seen (30% down its mask, midway across: see grasp_point);
                  otherwise the most interior pixel of the mask nearest its centroid (on the object even
                  when it is partly hidden)
    destination   the point of the target's free area nearest the target's centre. Free area: the target's
                  convex hull scaled by RIM about its centre, where the target or an object standing on it
                  is seen (not an occluder such as the arm), less the other objects' masks grown by a bit
                  more than half the pick object's size (CLEARANCE)
    trace         8 points from the grasp point to the destination, an arc raised in the image (a lift)
    relations     "on" when the first object's base lies on the second's hull, otherwise left of / right of,
                  and in front of (lower in the image) / behind
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ...coords import CoordinateSpace
from ...sandboxes.robot_scene import COLORS as SCENE_COLORS
from .masks import bbox, convex_hull, depth_map, dilate, interior_point

COLORS = tuple(SCENE_COLORS)  # the colour words an instruction may use: the simulated scene's palette
KINDS = {"cube": "cube", "cubes": "cube", "block": "cube", "blocks": "cube", "plate": "plate",
         "plates": "plate", "dish": "plate", "dishes": "plate"}
TRACE_POINTS = 8
# "put X on Y", "place X onto Y", "move X to Y", ...: X is what is picked, Y where it goes.
VERBS = r"(?:put|place|move|set|stack|drop|bring|transfer|carry|pick(?:\s+up)?)"
PREPS = r"(?:on\s+top\s+of|onto|on|into|inside|in|to|towards|toward|over|at)"
INSTRUCTION = re.compile(rf"\b{VERBS}\s+(?P<pick>.+?)\s+(?:and\s+(?:put|place|drop)\s+it\s+)?{PREPS}\s+"
                         r"(?P<target>.+)$", re.I)


class Unanswerable(Exception):
    """The question cannot be answered (no image, an unreadable task, ...): the message says why, in words."""





@dataclass(frozen=True)
class ObjectRef:
    """An object the instruction names: colour and kind, either may be missing ("the cube", "the red one")."""

    color: str | None
    kind: str | None
    text: str

    @property
    def name(self) -> str:
        return " ".join(p for p in (self.color, self.kind) if p) or self.text


def object_ref(text: str) -> ObjectRef:
    words = re.findall(r"[a-z]+", text.lower())
    color = next((w for w in words if w in COLORS), None)
    kind = next((KINDS[w] for w in words if w in KINDS), None)
    return ObjectRef(color, kind, text.strip())


def parse_instruction(task: str) -> tuple[ObjectRef, ObjectRef]:
    """(what to pick, where it goes) from "put the red cube on the blue plate" and its variants."""
    text = re.sub(r"\s+", " ", task.strip().rstrip(".!"))
    m = INSTRUCTION.search(text)
    if not m:
        raise Unanswerable(f"cannot tell from the task {task!r} what to pick and where to put it "
                           "(expected e.g. 'put the red cube on the blue plate')")
    pick, target = object_ref(m.group("pick")), object_ref(m.group("target"))
    for role, ref in (("object to pick", pick), ("target", target)):
        if ref.color is None and ref.kind is None:
            raise Unanswerable(f"the task {task!r} names no colour or kind for the {role} ({ref.text!r})")
    return pick, target


# ---- the scene ------------------------------------------------------------------------------------------

@dataclass
class SceneObject:
    name: str  # "<color> <kind>"
    color: str | None
    kind: str | None
    mask: np.ndarray  # HxW bool: the pixels where the object is seen
    grid_box: list[float] | None = None  # a box given with it (the oracle's truth), in grid1000

    @property
    def area(self) -> int:
        return int(self.mask.sum())


@dataclass
class Scene:
    width: int
    height: int
    objects: list[SceneObject]
    source: str  # "the scene truth and segmentation" / "colour segmentation of the image"
    missing: str = ""  # why an object may not have been found (detector): said when a lookup fails

    @property
    def space(self) -> CoordinateSpace:
        return CoordinateSpace("grid1000", self.width, self.height)

    def find(self, ref: ObjectRef) -> tuple[SceneObject | None, str]:
        """(the object the instruction names, or None and why not): same colour and kind, a missing colour
        or kind matching any; it must be the only match (never a guess between two)."""
        hits = [o for o in self.objects if (ref.color is None or o.color == ref.color)
                and (ref.kind is None or o.kind == ref.kind)]
        if len(hits) == 1:
            return hits[0], ""
        seen = ", ".join(o.name for o in self.objects) or "no objects"
        if hits:
            return None, (f"I cannot tell which object is the {ref.name}: {_count(len(hits))} objects match "
                          f"({', '.join(o.name for o in hits)})")
        return None, f"I cannot find the {ref.name} in the image (from {self.source}, I see: {seen})"

    def at(self, u: int, v: int) -> SceneObject | None:
        for o in self.objects:
            if o.mask[v, u]:
                return o
        return None


def _count(n: int) -> str:
    return ("no", "one", "two", "three", "four", "five", "six")[n] if n < 7 else "several"


def grid(scene: Scene, u: float, v: float) -> list[int]:
    x, y = scene.space.from_screen(u, v)
    return [int(x), int(y)]


def grid_box(scene: Scene, obj: SceneObject) -> list[int]:
    if obj.grid_box is not None:
        return [int(round(c)) for c in obj.grid_box]
    u0, v0, u1, v1 = bbox(obj.mask)
    return grid(scene, u0, v0) + grid(scene, u1, v1)


# ---- the answers, in pixels -----------------------------------------------------------------------------

TOP_FACE = 0.3  # a cube's top-face centre lies this share of its mask's height below the mask's top


def grasp_point(obj: SceneObject) -> tuple[int, int]:
    """Where to grasp: a cube's top-face centre as seen, else the interior point nearest the centroid.

    A camera above and in front sees a cube's top face over its sides, so the top face's centre is on the row
    TOP_FACE down the mask, midway across it. Lifted with depth, that pixel lands on the top face at the cube's
    xy (measured on the tabletop's seeds 40-99: 1.8 px from the projected top centre on average, 3.1 mm in xy
    after the lift, against 16 mm for the mask's centroid, whose pixel lies on a side face)."""
    if obj.kind == "cube":
        u0, v0, u1, v1 = bbox(obj.mask)
        v = int(round(v0 + TOP_FACE * (v1 - v0)))
        us = np.nonzero(obj.mask[v])[0]
        u = int(round((us.min() + us.max()) / 2)) if us.size else -1
        if us.size and obj.mask[v, u]:
            return u, v
    return interior_point(obj.mask)


CLEARANCE = 1.25  # the margin kept from other objects, in halves of the pick object's (smaller) image size
RIM = 0.8  # the share of the target (its hull scaled about its centre) where a placed object's centre may go


def free_area(scene: Scene, target: SceneObject, pick: SceneObject | None) -> tuple[np.ndarray, int]:
    """(the pixels of the target where the pick object's centre can go, the margin kept from other objects).

    The target's hull scaled by RIM about its centre (the success check wants the centre within the plate's
    radius less 1 cm, 0.86 of it; scaling keeps a disc seen as an ellipse an ellipse), where the target is seen
    or another object stands on it (not where an occluder such as the arm hides it: a point there would be
    lifted onto the occluder), less the other objects grown by CLEARANCE times half the pick object's size,
    or by less when that leaves nothing (a plate with a cube on it has little room)."""
    others = np.zeros_like(target.mask)
    for o in scene.objects:
        if o is not target and o is not pick:
            others |= o.mask
    surface = convex_hull(target.mask, RIM) & (target.mask | others)
    if not surface.any():  # a sliver: all of it
        surface = target.mask.copy()
    if pick is not None:
        u0, v0, u1, v1 = bbox(pick.mask)
        margin = max(1, round(CLEARANCE * min(u1 - u0 + 1, v1 - v0 + 1) / 2))
    else:
        margin = 2
    while True:
        free = surface & ~dilate(others, margin)
        if free.any() or margin == 0:
            return free, margin
        margin //= 2


def destination(scene: Scene, target: SceneObject, pick: SceneObject | None) -> tuple[tuple[int, int], np.ndarray, int]:
    """(where the pick object's centre goes, the free area, the margin): the free pixel nearest the target's
    centre (its hull's centroid) that is not on the free area's very edge: the middle of a free plate, or
    beside what stands on it, as close to the middle as the margin allows; on a free cube, its top face."""
    free, margin = free_area(scene, target, pick)
    if not free.any():
        raise Unanswerable(f"there is no free space on the {target.name}: other objects cover it")
    if target.kind == "cube":
        g = grasp_point(target)
        if free[g[1], g[0]]:
            return g, free, margin
    u0, v0, u1, v1 = bbox(free)
    crop = np.zeros((v1 - v0 + 3, u1 - u0 + 3), bool)
    crop[1:-1, 1:-1] = free[v0:v1 + 1, u0:u1 + 1]
    depth = depth_map(crop)[1:-1, 1:-1]
    vs, us = np.nonzero(depth >= min(3, int(depth.max())))
    hv, hu = np.nonzero(convex_hull(target.mask))
    i = int(np.argmin((us + u0 - hu.mean()) ** 2 + (vs + v0 - hv.mean()) ** 2))
    return (int(us[i] + u0), int(vs[i] + v0)), free, margin


def free_points(point: tuple[int, int], free: np.ndarray, size: int) -> list[tuple[int, int]]:
    """3-5 points inside `free` whose mean is `point`: the point, and along each image axis the pair of points
    on either side of it, as far out as both fit (up to `size`); repeated when the area is a pixel or two."""
    u, v = point
    out = [point]

    def ok(q):
        return 0 <= q[1] < free.shape[0] and 0 <= q[0] < free.shape[1] and bool(free[q[1], q[0]])

    for du, dv in ((1, 0), (0, 1)):
        r = next((r for r in range(max(size, 1), 0, -1)
                  if ok((u + du * r, v + dv * r)) and ok((u - du * r, v - dv * r))), 0)
        if r:
            out += [(u + du * r, v + dv * r), (u - du * r, v - dv * r)]
    while len(out) < 3:
        out.append(point)
    return out


def trace(start: tuple[int, int], end: tuple[int, int], width: int, height: int,
          n: int = TRACE_POINTS) -> list[tuple[float, float]]:
    """n points from start to end on an arc raised in the image (up = lifted), staying inside the image."""
    (u0, v0), (u1, v1) = start, end
    dist = math.hypot(u1 - u0, v1 - v0)
    lift = min(max(0.3 * dist, 0.04 * height), 0.25 * height)
    top = min(v0, v1)
    lift = min(lift, max(top, 0))  # never above the image's top row
    pts = []
    for i in range(n):
        t = i / (n - 1)
        u = u0 + t * (u1 - u0)
        v = v0 + t * (v1 - v0) - lift * math.sin(math.pi * t)
        pts.append((min(max(u, 0.0), width - 1.0), min(max(v, 0.0), height - 1.0)))
    return pts


def grasp_box(obj: SceneObject, point: tuple[int, int]) -> tuple[int, int, int, int]:
    u0, v0, u1, v1 = bbox(obj.mask)
    hw, hh = max(1, round(0.3 * (u1 - u0 + 1))), max(1, round(0.3 * (v1 - v0 + 1)))
    u, v = point
    return max(u0, u - hw), max(v0, v - hh), min(u1, u + hw), min(v1, v + hh)


def relations(scene: Scene, a: SceneObject, b: SceneObject) -> list[tuple[str, str, str]]:
    """a's relations to b in image terms: "on" when a's base rests on b's surface; else its side and depth."""
    au0, av0, au1, av1 = bbox(a.mask)
    bu0, bv0, bu1, bv1 = bbox(b.mask)
    hull = convex_hull(b.mask)
    base = a.mask.copy()
    base[: max(av0, av1 - max(1, (av1 - av0 + 1) // 4) + 1)] = False  # the lowest quarter of a's rows
    base_v, base_u = np.nonzero(base)
    # a's lowest pixels sit on b's hull (the part of b it hides included): resting on it
    on_share = float(hull[base_v, base_u].mean()) if base_v.size else 0.0
    if on_share >= 0.6 and bv0 <= (av0 + av1) / 2 <= bv1:
        return [(a.name, "on", b.name)]
    out = []
    acu, acv = (au0 + au1) / 2, (av0 + av1) / 2
    bcu, bcv = (bu0 + bu1) / 2, (bv0 + bv1) / 2
    du, dv = acu - bcu, acv - bcv
    horizontal = "left of" if du < 0 else "right of"
    depth = "in front of" if dv > 0 else "behind"  # lower in the image: nearer the camera
    # the larger displacement relative to the objects' sizes comes first; the other only if clear
    su = abs(du) / max(1.0, (au1 - au0 + bu1 - bu0) / 2)
    sv = abs(dv) / max(1.0, (av1 - av0 + bv1 - bv0) / 2)
    first, second = ((horizontal, su), (depth, sv)) if su >= sv else ((depth, sv), (horizontal, su))
    out.append((a.name, first[0], b.name))
    if second[1] >= 0.5:
        out.append((a.name, second[0], b.name))
    return out


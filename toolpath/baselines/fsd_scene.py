"""What the FSD offline policies share: reading the embodied agent's question, and answering it from object masks.

The oracle (fsd_oracle.py) and the detector (fsd_detector.py) differ only in where the objects come from (the
simulator's segmentation, or colour and shape in the rgb image); both hand a `Scene` (named objects, each a
boolean mask over the image) to `answer`, which writes the reply in FSD's grammar (policies.formats.fsd). Everything
here is in image pixels (u right, v down); the only conversion to the 0-1000 grid is coords.CoordinateSpace.

What they read: the SceneObservation the embodied agent hands them (task, question, rgb image and its size;
for a policy that observes "truth", the simulator's objects and the segmentation image). Called without
one, they read the same from the last user message as the agent lays it out (`read_prompt`):
    Task: put the red cube on the blue plate
    Image: 640x480 pixels; coordinates on a 0-1000 grid (x to the right, y down).
    Question: <one of fsd.QUESTIONS, or fsd.identify_question(x, y)>
    [Scene truth:            <- only for a policy that observes ("image", "truth")
     {"index": 0, "name": "red cube", "kind": "cube", "color": "red", "box": [x1, y1, x2, y2]}
     Segmentation: the second image; ...]
with images [rgb PNG, (segmentation PNG)].

How each answer is made (image terms; the agent lifts points to 3D and plans the clearance itself):
    grasp point   a cube's top-face centre as seen (30% down its mask, midway across: see grasp_point);
                  otherwise the most interior pixel of the mask nearest its centroid (on the object even
                  when it is partly hidden)
    destination   the point of the target's free area nearest the target's centre. Free area: the target's
                  convex hull scaled by RIM about its centre, where the target or an object standing on it
                  is seen (not an occluder such as the arm), less the other objects' masks grown by a bit
                  more than half the pick object's size (CLEARANCE)
    trace         8 points from the grasp point to the destination, an arc raised in the image (a lift)
    affordance    a box around the grasp point, about 60% of the pick object's extent
    free_space    the destination and pairs of points either side of it along each image axis, all inside
                  the free area (3-5 points whose mean is the destination: where the agent places)
    relations     both task objects with boxes; "on" when the pick object's base lies on the target's hull,
                  otherwise left of / right of, and in front of (lower in the image) / behind
    identify      the object whose mask holds the pixel, or "nothing"
An object that is not there, or an unreadable message or image, is answered in words without coordinates.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..coords import CoordinateSpace
from ..observations import SceneObservation
from ..policies.base import Response, word_count
from ..policies.formats import fsd
from ..sandboxes.robot_scene import COLORS as SCENE_COLORS
from ..state import Message
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


# ---- reading the message -------------------------------------------------------------------------------

@dataclass
class Prompt:
    task: str
    question: str
    kind: str | None  # fsd.question_kind of the question
    images: list[str]  # artifact paths, in order: rgb, (segmentation)
    stated_size: tuple[int, int] | None  # (width, height) from the "Image:" line
    truth: list[dict] = field(default_factory=list)  # the "Scene truth" objects, as given
    truth_issues: list[str] = field(default_factory=list)  # truth lines that could not be read
    words_in: int = 0


def _truth_problem(obj: Any) -> str | None:
    if (not isinstance(obj, dict) or not isinstance(obj.get("index"), int) or isinstance(obj["index"], bool)
            or not isinstance(obj.get("name"), str)):
        return "lacks an integer 'index' or a string 'name'"
    return None


def prompt_of(obs: SceneObservation, messages: list[Message]) -> Prompt:
    """The Prompt of the agent's observation (the words of the messages still count as the tokens read)."""
    truth, issues = [], []
    for n, obj in enumerate(obs.truth, 1):
        problem = _truth_problem(obj)
        if problem:
            issues.append(f"truth object {n} {problem}: {str(obj)[:80]!r}")
        else:
            truth.append(obj)
    images = [p for p in (obs.image, obs.segmentation if obs.truth else None) if p]
    return Prompt(task=obs.task.strip(), question=obs.question.strip(), kind=fsd.question_kind(obs.question),
                  images=images, stated_size=tuple(obs.size) if obs.size else None, truth=truth, truth_issues=issues,
                  words_in=sum(word_count(getattr(m, "content", "") or "") for m in messages))


def read_prompt(messages: list[Message]) -> Prompt:
    """The task, question, images and (if present) scene truth from the last user message."""
    user = next((m for m in reversed(messages) if getattr(m, "role", None) == "user"), None)
    if user is None:
        raise Unanswerable("there is no user message to answer")
    content = user.content or ""
    task, size, question_lines, truth, issues = "", None, [], [], []
    section = "head"
    for n, line in enumerate(content.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("Task:"):
            task, section = stripped[5:].strip(), "head"
        elif stripped.startswith("Image:"):
            m = re.search(r"(\d+)\s*[x×]\s*(\d+)", stripped)
            size = (int(m.group(1)), int(m.group(2))) if m else None
            section = "head"
        elif stripped.startswith("Question:"):
            question_lines, section = [stripped[9:].strip()], "question"
        elif stripped.startswith("Scene truth:"):
            section = "truth"
        elif stripped.startswith("Segmentation:"):
            section = "end"
        elif section == "question":
            question_lines.append(line)
        elif section == "truth" and stripped:
            try:
                obj = json.loads(stripped)
            except json.JSONDecodeError as err:
                issues.append(f"truth line {n} is not JSON ({err.msg}): {stripped[:80]!r}")
                continue
            problem = _truth_problem(obj)
            if problem:
                issues.append(f"truth line {n} {problem}: {stripped[:80]!r}")
                continue
            truth.append(obj)
    question = "\n".join(question_lines).strip()
    kind = fsd.question_kind(question) if question else None
    if kind is None:  # a message laid out differently: recognise the question anywhere in it
        kind = fsd.question_kind(content)
        question = question or content
    words = sum(word_count(getattr(m, "content", "") or "") for m in messages)
    return Prompt(task=task, question=question, kind=kind, images=[im.path for im in user.images],
                  stated_size=size, truth=truth, truth_issues=issues, words_in=words)


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


# ---- images ---------------------------------------------------------------------------------------------

def load_rgb(path: str | None) -> np.ndarray:
    from .images import read_rgb

    return read_rgb(path, "image", Unanswerable, min_side=4)


def load_labels(path: str | None, shape: tuple[int, int]) -> np.ndarray:
    """The segmentation image as integers (index + 1 of the object seen, 0 for anything else)."""
    from PIL import Image

    if not path:
        raise Unanswerable("the message has no segmentation image (the second image)")
    try:
        with Image.open(path) as im:
            if im.mode not in ("L", "P", "I", "I;16", "I;16L", "I;16B", "I;16N"):
                raise Unanswerable(f"the segmentation image {Path(path).name} is {im.mode}, expected one channel "
                                   "(16-bit 'I;16' or 8-bit 'L')")
            labels = np.asarray(im).astype(np.int64)
    except (OSError, ValueError, Image.DecompressionBombError) as err:
        raise Unanswerable(f"cannot read the segmentation image {Path(path).name}: {err}") from None
    if labels.shape != tuple(shape):
        raise Unanswerable(f"the segmentation image is {labels.shape[1]}x{labels.shape[0]} but the rgb image is "
                           f"{shape[1]}x{shape[0]}")
    return labels


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


def _px(u: float, v: float) -> str:
    return f"({u:.0f}, {v:.0f})"


def answer(scene: Scene, prompt: Prompt) -> str:
    """The reply, in FSD's grammar: <think> what was done </think><answer> ... </answer>; or words only."""
    kind = prompt.kind
    if kind is None:
        raise Unanswerable("the question is none of the FSD questions (relations, trace, affordance, free space, "
                           "identify)")
    if kind == "identify":
        return _identify(scene, prompt)
    pick_ref, target_ref = parse_instruction(prompt.task)
    (pick, why_pick), (target, why_target) = scene.find(pick_ref), scene.find(target_ref)
    for obj, why in ((pick, why_pick), (target, why_target)):
        if obj is None:
            raise Unanswerable(f"{why}.{' ' + scene.missing if scene.missing else ''}")
    if pick is target:
        raise Unanswerable(f"the task names the same object twice ({pick.name})")
    think = [f"From {scene.source}: the {pick.name} covers {pick.area} pixels, the {target.name} {target.area}."]
    if prompt.stated_size and prompt.stated_size != (scene.width, scene.height):
        think.append(f"The message says the image is {prompt.stated_size[0]}x{prompt.stated_size[1]}; it is "
                     f"{scene.width}x{scene.height}, and the grid is over the image as it is.")
    if kind == "relations":
        rels = relations(scene, pick, target)
        body = "\n".join(fsd.format_object(o.name, grid_box(scene, o)) for o in (pick, target))
        body += "\n" + "\n".join(fsd.format_relation(s, r, o) for s, r, o in rels)
        think.append("Relations from the image: " + "; ".join(f"{s} {r} {o}" for s, r, o in rels) + ".")
        return _reply(think, body)
    g = grasp_point(pick)
    if kind == "affordance":
        box = grasp_box(pick, g)
        think.append(f"Grasp at {_px(*g)}; box {_px(box[0], box[1])}-{_px(box[2], box[3])} px.")
        return _reply(think, fsd.format_box(grid(scene, box[0], box[1]) + grid(scene, box[2], box[3])))
    dest, free, margin = destination(scene, target, pick)
    if kind == "free_space":
        pts = free_points(dest, free, max(2, margin))
        think.append(f"Free area on the {target.name}: {int(free.sum())} pixels, {margin} px or more from other "
                     f"objects; points around {_px(*dest)}.")
        return _reply(think, fsd.format_points([grid(scene, u, v) for u, v in pts]))
    if kind == "trace":
        pts = trace(g, dest, scene.width, scene.height)
        think.append(f"Trace from the grasp point {_px(*g)} to the free spot nearest the {target.name}'s centre "
                     f"{_px(*dest)}, raised over the way.")
        return _reply(think, fsd.format_points([grid(scene, u, v) for u, v in pts]))
    raise Unanswerable(f"the question kind {kind!r} is not one this policy answers")


def _identify(scene: Scene, prompt: Prompt) -> str:
    point = fsd.identify_point(prompt.question)
    if point is None:
        raise Unanswerable("the identify question gives no readable point")
    x, y = point
    try:
        u, v = scene.space.to_screen(x, y)
    except ValueError as err:
        raise Unanswerable(f"the point to identify is not on the image: {err}") from None
    obj = scene.at(u, v)
    name = obj.name if obj else fsd.NOTHING
    return _reply([f"From {scene.source}: pixel {_px(u, v)} shows {'the ' + name if obj else 'no object'}."],
                  f"<ref>{name}</ref>")


def _reply(think: list[str], body: str) -> str:
    return f"<think>{' '.join(think)}</think>\n<answer>\n{body}\n</answer>"


def respond(messages: list[Message], make_scene, observation: Any = None) -> Response:
    """The Response to the agent's question (its observation, else its last user message): `make_scene(prompt)`
    builds the Scene (or raises Unanswerable); the reply's text is both `text` and `raw`; tokens are counted
    as words, as the other offline policies do."""
    started = time.perf_counter()
    words_in = sum(word_count(getattr(m, "content", "") or "") for m in messages)
    try:
        prompt = (prompt_of(observation, messages) if isinstance(observation, SceneObservation)
                  else read_prompt(messages))
        words_in = prompt.words_in
        raw = answer(make_scene(prompt), prompt)
    except Unanswerable as err:
        raw = f"Cannot answer: {err}"
    except Exception as err:  # noqa: BLE001 - a strange message or image must end in words, not a crash
        raw = f"Cannot answer: the question could not be handled ({type(err).__name__}: {err})"
    return Response(text=raw, raw=raw, tokens_in=words_in, tokens_out=word_count(raw),
                    latency_s=time.perf_counter() - started)

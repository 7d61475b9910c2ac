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

How each answer is made (image terms, by toolpath/tools/fsd/scene.py's geometry; the agent lifts points to 3D and
plans the clearance itself):
    grasp point, destination, trace: as tools/fsd/scene.py's docstring defines them (the spatial tools
                  answer from the same geometry)
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
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..observations import SceneObservation
from ..policies.base import Response, word_count
from ..policies.formats import fsd
from ..state import Message

# The scene and its geometry live with the tools (the spatial tools answer from them too); re-exported here
# because the FSD policies and their callers know them as fsd_scene's.
from ..tools.fsd.scene import (  # noqa: F401
    CLEARANCE,
    COLORS,
    INSTRUCTION,
    KINDS,
    PREPS,
    RIM,
    TOP_FACE,
    TRACE_POINTS,
    VERBS,
    ObjectRef,
    Scene,
    SceneObject,
    Unanswerable,
    destination,
    free_area,
    free_points,
    grasp_box,
    grasp_point,
    grid,
    grid_box,
    object_ref,
    parse_instruction,
    relations,
    trace,
)

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

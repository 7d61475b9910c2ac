"""The tiny VLM's data: easy-vqa's images with their questions (and a caption read off those questions), and
generated scenes of coloured shapes with known objects (captions, "Is there a ...?" with real negatives).

Every example is an `ImageQA`: an RGB image, its caption and the question-answer pairs about it. Everything is
deterministic by seed; the held-out halves (easy-vqa's own test split, scenes from a separate seed stream)
never reach training.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

import numpy as np

from ..evals.benchmarks.edits.scene import LIGHT_BG, EditScene, Obj, render
from ..tools.image.edit_base import COLORS, SHAPES

CAPTION_PROMPT = "Describe the image."
EASY_VQA_COLORS = ("red", "green", "blue", "gray", "teal", "black", "yellow", "brown")
EASY_VQA_SHAPES = ("circle", "rectangle", "triangle")
# White would vanish on the light backgrounds the scenes use.
SCENE_COLORS = tuple(c for c in COLORS if c != "white")
SCENE_HELDOUT_STREAM = 1_000_003  # added to the seed: held-out scenes come from their own random stream


@dataclass
class ImageQA:
    image: np.ndarray  # H×W×3 uint8 RGB
    caption: str  # "a red circle and a blue square"
    qa: list[tuple[str, str]] = field(default_factory=list)  # (question, answer)
    objects: tuple[tuple[str, str], ...] = ()  # (colour, shape) of each object, when known
    source: str = ""  # "easy-vqa" or "scene"


# ---- easy-vqa --------------------------------------------------------------------------------------------

def _easy_vqa():
    try:
        import easy_vqa
    except ImportError as e:  # an optional extra: say how to get it
        raise RuntimeError("the tiny VLM trains on the easy-vqa package: pip install 'toolpath[local]' "
                           "(or pip install easy-vqa)") from e
    return easy_vqa


def _attributes(questions: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    """The (colour, shape) an image's questions reveal: open answers name them, and a yes to a positive
    question (or a no to a negated one) confirms the colour or shape the question names."""
    color = shape = None
    for q, a in questions:
        words = re.findall(r"[a-z]+", q.lower())
        named_c = next((w for w in words if w in EASY_VQA_COLORS), None)
        named_s = next((w for w in words if w in EASY_VQA_SHAPES), None)
        if a in EASY_VQA_SHAPES:
            shape, color = a, named_c or color
        elif a in EASY_VQA_COLORS:
            color, shape = a, named_s or shape
        elif a in ("yes", "no"):
            negated = "not" in words or "no" in words
            if (a == "yes") != negated:
                color, shape = named_c or color, named_s or shape
    return color, shape


def easy_vqa_examples(split: str) -> list[ImageQA]:
    """easy-vqa's `train` or `test` split, one ImageQA per image (ordered by image id)."""
    from PIL import Image

    ev = _easy_vqa()
    if split not in ("train", "test"):
        raise ValueError(f"easy-vqa split must be 'train' or 'test', not {split!r}")
    texts, answers, ids = ev.get_train_questions() if split == "train" else ev.get_test_questions()
    paths = ev.get_train_image_paths() if split == "train" else ev.get_test_image_paths()
    per_image: dict[int, list[tuple[str, str]]] = {}
    for q, a, i in zip(texts, answers, ids):
        per_image.setdefault(i, []).append((q, a))
    out = []
    for i in sorted(paths):
        qa = per_image.get(i, [])
        color, shape = _attributes(qa)
        caption = f"a {color or 'coloured'} {shape or 'shape'}"
        with Image.open(paths[i]) as im:
            image = np.asarray(im.convert("RGB"))
        out.append(ImageQA(image, caption, qa, ((color, shape),) if color and shape else (), "easy-vqa"))
    return out


# ---- generated scenes ------------------------------------------------------------------------------------

def _place(rng: random.Random, size: int, n: int) -> list[tuple[int, int, int, int]]:
    """Up to n boxes inside a size×size image that keep a gap between them."""
    boxes: list[tuple[int, int, int, int]] = []
    for _ in range(60 * n):
        if len(boxes) == n:
            break
        side = rng.randint(size * 9 // 32, size * 15 // 32)
        w = side if rng.random() < 0.6 else int(side * rng.uniform(1.2, 1.5))
        h = side
        if w >= size - 2:
            continue
        x0, y0 = rng.randint(1, size - w - 1), rng.randint(1, size - h - 1)
        box = (x0, y0, x0 + w, y0 + h)
        gap = max(2, size // 32)
        if all(box[2] + gap <= b[0] or b[2] + gap <= box[0] or box[3] + gap <= b[1] or b[3] + gap <= box[1]
               for b in boxes):
            boxes.append(box)
    return boxes


def article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def scene_caption(objects: list[tuple[str, str]]) -> str:
    parts = [f"{article(c)} {c} {s}" for c, s in objects]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _scene_questions(rng: random.Random, objects: list[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    """Yes/no object questions, half with real negatives: an absent shape, or a present shape in a colour it
    does not have (the hard case); plus "What color is the X?" for shapes that occur once."""
    present_s = {s for _, s in objects}
    present = set(objects)
    qa = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.45:  # positive
            c, s = rng.choice(objects)
            name = s if rng.random() < 0.4 else f"{c} {s}"
            qa.append((f"Is there {article(name)} {name} in the image?", "yes"))
        elif kind < 0.9:  # negative
            absent_s = [s for s in SHAPES if s not in present_s]
            if rng.random() < 0.5 and absent_s:
                s = rng.choice(absent_s)
                name = s if rng.random() < 0.5 else f"{rng.choice(SCENE_COLORS)} {s}"
            else:
                s = rng.choice(sorted(present_s))
                c = rng.choice([c for c in SCENE_COLORS if (c, s) not in present])
                name = f"{c} {s}"
            qa.append((f"Is there {article(name)} {name} in the image?", "no"))
        else:
            unique = [(c, s) for c, s in objects if sum(x == s for _, x in objects) == 1]
            if unique:
                c, s = rng.choice(unique)
                qa.append((f"What color is the {s}?", c))
    return list(dict.fromkeys(qa))


def make_scene(rng: random.Random, size: int = 64, max_objects: int = 3, n_questions: int = 6) -> ImageQA:
    """One scene of 1..max_objects coloured shapes on a light background, its caption (left to right) and
    questions about it."""
    while True:
        boxes = _place(rng, size, rng.randint(1, max_objects))
        if boxes:
            break
    boxes.sort(key=lambda b: (b[0] + b[2], b[1]))
    objs = [Obj(i, rng.choice(SHAPES), rng.choice(SCENE_COLORS), b) for i, b in enumerate(boxes)]
    bg = {"kind": "uniform", "colors": [list(rng.choice(LIGHT_BG))]}
    image = np.array(render(EditScene(size, size, bg, tuple(objs))))
    objects = [(o.color, o.shape) for o in objs]
    return ImageQA(image, scene_caption(objects), _scene_questions(rng, objects, n_questions), tuple(objects), "scene")


def scenes(n: int, seed: int, heldout: bool = False, size: int = 64) -> list[ImageQA]:
    rng = random.Random(seed + (SCENE_HELDOUT_STREAM if heldout else 0))
    return [make_scene(rng, size) for _ in range(n)]


def caption_variants(caption: str) -> list[str]:
    """Ways the caption is asked for and said (the first is the one evaluated)."""
    return [CAPTION_PROMPT, "What is in the image?", "Describe this picture briefly."]

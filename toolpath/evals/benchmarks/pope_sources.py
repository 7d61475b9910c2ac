"""Images whose objects are known, for the generated POPE and CHAIR sets: easy-vqa's test images and shape scenes
drawn here. Each source is a small "dataset" with its own object vocabulary, the way COCO is POPE's.

Object names. An image's objects are its coloured shapes ("red circle") and their bare shapes ("circle"); a
question or a caption about an object is about one of those names. What a name means is decided here, once:

  * scenes: shapes circle, square, rectangle, triangle, star, ellipse (edit_base.SHAPES, drawn as the edit
    suite draws them: a rectangle and an ellipse are 1.6:1, a square and a circle 1:1); colours edit_base.COLORS
    but white (the backgrounds are light). A square is also a rectangle and a circle also an ellipse, so
    "rectangle" is true of an image with a square (and "red rectangle" of one with a red square): such names
    are never asked as absent (POPE) and never counted as hallucinated (CHAIR). A 1.6:1 rectangle is not a
    square, nor an ellipse a circle.
  * easy-vqa: shapes circle, rectangle, triangle; colours red, green, blue, yellow, teal, brown, black, gray (its
    own answer words). Its rectangles have any aspect, squares included (measured: 1.0 to 3.4), so "square" is
    true of them; a circle is also an ellipse. An image's shape and colour are read from its own questions and
    answers ("what is the red shape?" → triangle; "is there a circle?" → no, and the two others known absent →
    the third); the few images whose questions do not pin both down are left out rather than guessed.

Generated scenes are not uniform: POPE's popular and adversarial negatives only differ from random ones in a
dataset whose objects have a skewed frequency and co-occur, as COCO's do (a dining table with chairs). Each
coloured shape has a fixed Zipf-like frequency and belongs to one of a few fixed themes (groups of six); a
scene picks a theme and draws most of its 2–4 objects from it. The frequencies and themes are a property of
the generator (VOCAB_SEED), the same for every eval seed; the seed picks the scenes.
"""

from __future__ import annotations

import functools
import os
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ...paths import home
from ...tools.image.edit_base import COLORS, SHAPES
from .edits.scene import CONTRAST, LIGHT_BG, EditScene, Obj, delta_e_rgb, render

SCENE_COLORS = tuple(c for c in COLORS if c != "white")
SCENE_SHAPES = SHAPES
EASYVQA_COLORS = ("red", "green", "blue", "yellow", "teal", "brown", "black", "gray")
EASYVQA_SHAPES = ("circle", "rectangle", "triangle")
SOURCES = ("easy-vqa", "scenes")

# Names true of a drawn shape besides its own (see the module docstring), per source.
ALSO_TRUE = {"scenes": {"square": ("rectangle",), "circle": ("ellipse",)},
             "easy-vqa": {"rectangle": ("square",), "circle": ("ellipse",)},
             # the tiny VLM's own scenes (train/vlm_data) draw every shape at 1:1 to 1.5:1, so each name of a
             # pair may be what the other looks like
             "tiny-vlm-scenes": {"square": ("rectangle",), "rectangle": ("square",), "circle": ("ellipse",),
                                 "ellipse": ("circle",)}}

VOCAB_SEED = 21  # fixes the scenes' object frequencies and themes (not the eval seed: they are the dataset's)
THEME_SIZE = 6
IN_THEME = 0.8  # the chance that a scene's object comes from its theme
SCENE_SIZE = (384, 288)  # a 3×3 grid of 128×96 cells, one object per cell at most


@dataclass(frozen=True)
class KnownImage:
    id: str  # unique across sources: "easyvqa-432", "scene-0-017"
    source: str  # one of SOURCES
    shapes: tuple[tuple[str, str], ...]  # (colour, shape) of every object drawn, in drawing order
    path: str = ""  # the PNG; a scene's is written by `scene_png` when first asked for

    def objects(self) -> list[str]:
        """Its object names: every coloured shape, then every bare shape, each once."""
        out = [f"{c} {s}" for c, s in self.shapes]
        return out + [s for s in dict.fromkeys(s for _, s in self.shapes)]

    def true_names(self) -> set[str]:
        """Every name that is true of the image: its objects and what they also are (ALSO_TRUE)."""
        also = ALSO_TRUE[self.source]
        out = set(self.objects())
        for c, s in self.shapes:
            for other in also.get(s, ()):
                out.update((other, f"{c} {other}"))
        return out


def vocabulary(source: str) -> list[str]:
    """Every object name a question about the source may ask: coloured shapes, then bare shapes."""
    colors, shapes = (EASYVQA_COLORS, EASYVQA_SHAPES) if source == "easy-vqa" else (SCENE_COLORS, SCENE_SHAPES)
    return [f"{c} {s}" for c in colors for s in shapes] + list(shapes)


# ---- easy-vqa ----------------------------------------------------------------------------------------------

def _facts(question: str, answer: str) -> tuple[dict[str, str], set[str]]:
    """What one easy-vqa question and answer say: {"shape"/"color": value} known present, and names known absent."""
    words = re.findall(r"[a-z]+", question.lower())
    colors = [w for w in words if w in EASYVQA_COLORS]
    shapes = [w for w in words if w in EASYVQA_SHAPES]
    present: dict[str, str] = {}
    absent: set[str] = set()
    if answer in EASYVQA_SHAPES:
        present["shape"] = answer
        if colors:
            present["color"] = colors[0]
    elif answer in EASYVQA_COLORS:
        present["color"] = answer
        if shapes:
            present["shape"] = shapes[0]
    elif answer in ("yes", "no"):
        negated = "not" in words or "no" in words  # "is there not a circle?", "is no blue shape present?"
        there = (answer == "yes") != negated
        for kind, named in (("shape", shapes), ("color", colors)):
            if named and there:
                present[kind] = named[0]
            elif named:
                absent.add(named[0])
    return present, absent


def generated_folders() -> list[Path]:
    """The folders the generated POPE and CHAIR sets' images are in: easy-vqa's test images (where the package
    is installed) and the scenes written under $TOOLPATH_HOME/benchmarks."""
    images = {str(Path(k.path).parent) for k in easyvqa_images()}
    return [Path(p) for p in sorted(images)] + [home() / "benchmarks"]


@functools.lru_cache(maxsize=1)
def easyvqa_images() -> tuple[KnownImage, ...]:
    """easy-vqa's test images whose one shape and colour its questions determine, by image id."""
    try:
        import easy_vqa
    except ImportError:
        raise RuntimeError("the easy-vqa package is not installed (pip install easy-vqa): the generated POPE and "
                           "CHAIR sets use its test images") from None
    texts, answers, image_ids = easy_vqa.get_test_questions()
    paths = easy_vqa.get_test_image_paths()
    known: dict[int, dict[str, str]] = {}
    absent: dict[int, set[str]] = {}
    for q, a, im in zip(texts, answers, image_ids):
        present, gone = _facts(q, a)
        known.setdefault(im, {}).update(present)
        absent.setdefault(im, set()).update(gone)
    out = []
    for im in sorted(paths):
        facts = known.get(im, {})
        for kind, values in (("shape", EASYVQA_SHAPES), ("color", EASYVQA_COLORS)):
            left = [v for v in values if v not in absent.get(im, set())]
            if kind not in facts and len(left) == 1:
                facts[kind] = left[0]
        if "shape" in facts and "color" in facts:
            out.append(KnownImage(f"easyvqa-{im}", "easy-vqa", ((facts["color"], facts["shape"]),), paths[im]))
    return tuple(out)


# ---- generated scenes --------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def scene_statistics() -> tuple[dict[tuple[str, str], float], list[list[tuple[str, str]]]]:
    """(weight of each coloured shape, themes): a fixed Zipf-like frequency over a fixed shuffle of the pairs,
    and the same shuffle cut into groups of THEME_SIZE."""
    pairs = [(c, s) for c in SCENE_COLORS for s in SCENE_SHAPES]
    random.Random(VOCAB_SEED).shuffle(pairs)
    weights = {p: 1.0 / (rank + 1) ** 0.8 for rank, p in enumerate(pairs)}
    order = list(pairs)
    random.Random(VOCAB_SEED + 1).shuffle(order)
    themes = [order[i:i + THEME_SIZE] for i in range(0, len(order), THEME_SIZE)]
    return weights, themes


def _box(shape: str, cell: tuple[int, int], rng: random.Random) -> tuple[int, int, int, int]:
    """A box for the shape inside a grid cell (column, row) of SCENE_SIZE, at a random size and offset."""
    cw, ch = SCENE_SIZE[0] // 3, SCENE_SIZE[1] // 3
    h = int(ch * rng.uniform(0.5, 0.75))
    w = int(h * {"ellipse": 1.6, "rectangle": 1.6, "triangle": 1.1}.get(shape, 1.0))
    w = min(w, cw - 10)
    x0 = cell[0] * cw + rng.randint(5, cw - w - 5)
    y0 = cell[1] * ch + rng.randint(5, ch - h - 5)
    return x0, y0, x0 + w, y0 + h


def make_scene(seed: int, index: int) -> tuple[KnownImage, EditScene]:
    """Scene `index` of a seed's set: a light uniform background and 2–4 coloured shapes, distinct (colour,
    shape) pairs in distinct cells, every colour contrasting with the background (ΔE ≥ edits' CONTRAST)."""
    rng = random.Random(f"pope-scene:{seed}:{index}")
    weights, themes = scene_statistics()
    pairs, w = list(weights), list(weights.values())
    theme = rng.choices(themes, weights=[sum(weights[p] for p in t) for t in themes])[0]
    bg = rng.choice(LIGHT_BG)
    chosen: list[tuple[str, str]] = []
    want = rng.randint(2, 4)
    while len(chosen) < want:
        pick = rng.choice(theme) if rng.random() < IN_THEME else rng.choices(pairs, weights=w)[0]
        if pick not in chosen and float(delta_e_rgb(COLORS[pick[0]], bg)) >= CONTRAST:
            chosen.append(pick)
    cells = rng.sample([(c, r) for r in range(3) for c in range(3)], len(chosen))
    objs = tuple(Obj(i + 1, s, c, _box(s, cell, rng)) for i, ((c, s), cell) in enumerate(zip(chosen, cells)))
    scene = EditScene(SCENE_SIZE[0], SCENE_SIZE[1], {"kind": "uniform", "colors": [list(bg)]}, objs)
    return KnownImage(f"scene-{seed}-{index:03d}", "scenes", tuple(chosen)), scene


def scene_png(seed: int, index: int) -> KnownImage:
    """The scene with its PNG under $TOOLPATH_HOME/benchmarks/scenes/seed<seed>/ (written once; rewritten when
    the drawing differs, so a changed renderer never leaves a stale image)."""
    image, scene = make_scene(seed, index)
    path = home() / "benchmarks" / "scenes" / f"seed{seed}" / f"{image.id}.png"
    save_png(render(scene), path)
    return replace(image, path=str(path))


def save_png(pixels, path: Path) -> None:
    """Write an RGB array as a PNG at `path`, only when the file is missing or holds another image (a changed
    renderer never leaves a stale one; an unchanged one is not rewritten under a reader)."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    data = buf.getvalue()
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)


def known_images(source: str, n: int, seed: int) -> list[KnownImage]:
    """`n` images of a source for a seed: easy-vqa's a seeded sample of its test images (seed 0: the first n by
    id), scenes the first n of the seed's set, drawn to files."""
    if source == "easy-vqa":
        pool = list(easyvqa_images())
        if seed:
            random.Random(seed).shuffle(pool)
        return pool[:n]
    if source == "scenes":
        return [scene_png(seed, i) for i in range(n)]
    raise ValueError(f"unknown image source {source!r}; known: {', '.join(SOURCES)}")

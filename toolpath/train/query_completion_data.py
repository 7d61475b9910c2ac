"""The query-completion corpus: pictures whose objects are known (easy-vqa's, the generated scenes'), each in a
degraded copy (blur, noise, under- or over-exposure, or none) so that image quality varies, with

- its measured quality (tools/retrieval/image_quality.py) and the words that say it ("blurry", "dark", ...),
  read off the measured parts, never off the degradation that was applied;
- a 1-2-word query about one of its objects ("circle", "red", "red circle");
- a descriptive caption that holds the query's words, worded with the measured quality, and describing the
  picture exactly, partly (the queried object only) or with a wrong extra object, so that how well the caption
  fits the picture (the retriever's similarity, measured later) varies too.

Everything follows from the seed. Held-out pictures (easy-vqa's test split, scenes of the held-out stream) are
what benchmarks/query_completion.py searches; training never sees them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from ..tools.image.edit_base import SHAPES
from ..tools.retrieval import image_quality as iq
from .vlm_data import EASY_VQA_COLORS, EASY_VQA_SHAPES, SCENE_COLORS, ImageQA, article, scene_caption

# Degradations and the strengths drawn for them: mild to strong, so measured quality spreads out.
STRENGTHS = {"blur": (0.6, 2.0), "noise": (0.02, 0.12), "dark": (0.4, 0.8), "bright": (0.1, 0.5)}
KIND_WEIGHTS = (("none", 0.3), ("blur", 0.2), ("noise", 0.2), ("dark", 0.15), ("bright", 0.15))
# Where the measured parts are bad enough to be worded (chosen on the scale of image_quality.py).
BLURRY, NOISY, DARK, WASHED_OUT, CLEAN = 0.3, 0.6, 0.35, 0.9, 0.8


@dataclass
class Picture:
    image: np.ndarray  # H×W×3 uint8, degraded
    objects: tuple[tuple[str, str], ...]  # (colour, shape)
    degradation: str  # what was applied (kept for the report, not used for wording)
    quality: iq.ImageQuality
    brightness: float  # mean luminance
    source: str
    base: int  # which of the source examples it is a copy of (copies of one example share it)


@dataclass
class Example:
    picture: Picture
    query: str
    description: str  # the objects, in words
    fit: str  # exact, partial or extra: how the description was made (the measured similarity decides the level)
    caption: str  # quality words + description


def degraded_pictures(examples: list[ImageQA], seed: int, copies: int = 1) -> list[Picture]:
    """`copies` degraded versions of every example that has known objects."""
    rng = random.Random(seed)
    kinds, weights = zip(*KIND_WEIGHTS)
    out = []
    for n, ex in enumerate(examples):
        if not ex.objects:
            continue
        for c in range(copies):
            kind = rng.choices(kinds, weights)[0]
            lo, hi = STRENGTHS.get(kind, (0.0, 0.0))
            image = iq.degrade(ex.image, kind, rng.uniform(lo, hi), seed=seed * 100_003 + n * 7 + c)
            out.append(Picture(image, tuple(ex.objects), kind, iq.measure(image), float(iq.luminance(image).mean()),
                               ex.source, n))
    return out


def quality_words(p: Picture) -> str:
    """How the picture looks, from its measured parts: "a blurry, dark picture of", "a sharp, clean picture of"."""
    q = p.quality
    words = []
    if q.sharpness < BLURRY:
        words.append("blurry")
    if q.noise < NOISY:
        words.append("noisy")
    if p.brightness < DARK:
        words.append("dark")
    elif p.brightness > WASHED_OUT and q.exposure < 0.5:
        words.append("washed-out")
    if not words and q.score >= CLEAN:
        words = ["sharp", "clean"]
    return f"a {', '.join(words)} picture of" if words else "a picture of"


def query_for(rng: random.Random, obj: tuple[str, str]) -> str:
    color, shape = obj
    return rng.choice((shape, color, f"{color} {shape}"))


def _palette(p: Picture) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (EASY_VQA_COLORS, EASY_VQA_SHAPES) if p.source == "easy-vqa" else (SCENE_COLORS, SHAPES)


def describe(rng: random.Random, p: Picture, target: tuple[str, str]) -> tuple[str, str]:
    """(description, fit): every object (exact), the queried one alone (partial), or every object plus one that is
    not there (extra)."""
    fit = rng.choice(("exact", "partial", "extra"))
    objects = [target] + [o for o in p.objects if o != target]
    if fit == "partial":
        objects = [target]
    elif fit == "extra":
        colors, shapes = _palette(p)
        absent = [(c, s) for c in colors for s in shapes if (c, s) not in p.objects]
        objects.append(rng.choice(absent))
    text = scene_caption(objects)
    if fit != "partial" and p.source == "easy-vqa" and len(objects) == 1:
        text += " on a white background"
    return text, fit


def examples(pictures: list[Picture], seed: int) -> list[Example]:
    rng = random.Random(seed + 17)
    out = []
    for p in pictures:
        target = rng.choice(p.objects)
        description, fit = describe(rng, p, target)
        out.append(Example(p, query_for(rng, target), description, fit, f"{quality_words(p)} {description}"))
    return out


def tercile_edges(values) -> tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    lo, hi = np.quantile(a, [1 / 3, 2 / 3])
    return float(lo), float(hi)


def level(value: float, edges: tuple[float, float]) -> str:
    return "low" if value < edges[0] else "medium" if value < edges[1] else "high"


def relevant(objects, query: str) -> bool:
    """Whether a picture with these (colour, shape) objects answers a 1-2-word query (a colour, a shape, or both
    of one object)."""
    words = query.lower().split()
    return any(all(w in (c, s) for w in words) for c, s in objects)


def quality_caption(p: Picture) -> str:
    """What the quality-aware retriever is fine-tuned on: the measured quality in words, then every object."""
    return f"{quality_words(p)} {scene_caption(list(p.objects))}"


__all__ = ["Picture", "Example", "degraded_pictures", "quality_words", "examples", "tercile_edges", "level",
           "relevant", "quality_caption", "article"]

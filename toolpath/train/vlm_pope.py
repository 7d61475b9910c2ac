"""POPE questions on the tiny VLM's own held-out scenes, with the popular and adversarial negatives counted over
the scenes it was trained on.

The generated POPE set (evals/benchmarks/pope_data) counts frequencies and co-occurrences over the images it
asks about, as POPE does over its 500 COCO images, and draws scenes unlike the tiny VLM's (384×288, themed).
POPE's adversarial setting works because a model trained on COCO says yes to objects that COCO shows together;
what this model saw together is its build's training scenes. So here:

  * images: scenes from vlm_data's held-out stream (never trained on), 64 px, as the build draws them;
  * statistics: object-name frequencies and co-occurrences over the build's training scenes (vlm_data.scenes
    with the build's seed and count: the same scenes the model learned from);
  * questions: pope_data's per image (a positive, then its negative, up to three times): random draws an absent
    name uniformly, popular takes the absent name most frequent in training, adversarial the absent name that
    co-occurred most often with the positive in training.

Labels are correct by construction: an image's names are its drawn (colour, shape) pairs and their bare shapes,
and a name is asked as absent only when nothing drawn can be it (pope_sources' "tiny-vlm-scenes" source: these
scenes draw a square or a rectangle, a circle or an ellipse, at 1:1 to 1.5:1, so each of a pair is true of the
other).
"""

from __future__ import annotations

import functools

from ..evals.benchmarks import Record
from ..evals.benchmarks.pope_data import SPLITS, image_records, statistics
from ..evals.benchmarks.pope_sources import KnownImage, save_png
from ..paths import home
from . import vlm_data
from .tiny_vlm import BuildConfig

SOURCE = "tiny-vlm-scenes"
TRAINING_SCENES = BuildConfig().scenes  # the count the default build trains on
IMAGES = 100


def known(example: vlm_data.ImageQA, image_id: str, path: str = "") -> KnownImage:
    return KnownImage(image_id, SOURCE, tuple(example.objects), path)


@functools.lru_cache(maxsize=4)
def training_statistics(seed: int, count: int = TRAINING_SCENES) -> tuple[list[str], dict[str, list[str]]]:
    """(names by frequency, per name the names that co-occurred with it, most often first) over the training
    scenes of the build with this seed."""
    if count < 1:
        raise ValueError(f"training scenes: need at least 1, got {count}")
    scenes = vlm_data.scenes(count, seed, size=64)
    return statistics([known(s, f"train-{i}") for i, s in enumerate(scenes)])


def heldout_images(seed: int, n: int) -> list[KnownImage]:
    """The first n held-out scenes of the build with this seed, written as PNGs under
    $TOOLPATH_HOME/benchmarks/tiny-vlm-scenes/seed<seed>/."""
    folder = home() / "benchmarks" / SOURCE / f"seed{seed}"
    out = []
    for i, example in enumerate(vlm_data.scenes(n, seed, heldout=True, size=64)):
        image_id = f"vlmscene-{seed}-{i:03d}"
        path = folder / f"{image_id}.png"
        save_png(example.image, path)
        out.append(known(example, image_id, str(path)))
    return out


def partner_agreement(scenes: list[tuple]) -> float:
    """How often a coloured shape's most frequent companion is the same in the two halves of `scenes` (each a
    tuple of (colour, shape) objects): about 1/(names − 1) when objects co-occur by chance, higher when the
    data has a co-occurrence prior for a model to learn (and for an adversarial POPE split to probe)."""
    from collections import Counter, defaultdict

    def companions(part: list[tuple]) -> dict:
        co: dict = defaultdict(Counter)
        for objects in part:
            names = set(objects)
            for a in names:
                co[a].update(b for b in names if b != a)
        return {a: min(c, key=lambda b: (-c[b], b)) for a, c in co.items() if c}

    half = len(scenes) // 2
    first, second = companions(scenes[:half]), companions(scenes[half:])
    both = [a for a in first if a in second]
    if not both:
        raise ValueError("partner_agreement: no object has a companion in both halves (too few multi-object scenes)")
    return sum(first[a] == second[a] for a in both) / len(both)


def records(seed: int = 0, splits: tuple[str, ...] = SPLITS, images: int = IMAGES,
            training_scenes: int = TRAINING_SCENES) -> list[Record]:
    """The set: for each split, every held-out image's questions, as pope_data.generated_records shapes them."""
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise ValueError(f"POPE split {unknown[0]!r}: expected one of {', '.join(SPLITS)}")
    by_freq, co = training_statistics(seed, training_scenes)
    pictures = heldout_images(seed, images)
    out = []
    for split in splits:
        for im in pictures:
            out.extend(image_records(im, split, seed, by_freq, co, SOURCE))
    return out

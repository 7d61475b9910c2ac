"""POPE's questions: generated from images whose objects are known (pope_sources), or read from POPE's files.

Generated, as POPE's own builder does it (its utils.pope), per image and per split:
  * positives: the image's first up-to-3 object names (its names shuffled by the seed first, so coloured and
    bare names both come up), each asked "Is there a/an {object} in the image?", label yes;
  * after each positive, one negative, label no, a name that is not true of the image (pope_sources:
    KnownImage.true_names, so "rectangle" is never asked of a square) and not yet asked of it:
      random       drawn uniformly from the source's vocabulary;
      popular      the source's most frequent name (in how many of the set's images it is an object);
      adversarial  the name that co-occurs most often with this positive in the set's images;
    a popular or adversarial candidate list that runs out falls back to a random draw, as POPE's does.
Frequencies and co-occurrences are counted per source over the images of the set (POPE: over its 500 COCO
images). Ties are broken by name, so a seed always gives the same questions. easy-vqa images hold one shape,
so no name co-occurs with its positives outside the image: there every adversarial negative is the random
fallback, and only the scenes make that split harder than random.

Real POPE files (`--data`): JSON lines {"question_id", "image", "text", "label": "yes"|"no"}, one split per
file (coco_pope_random.json, …: the split is the word random/popular/adversarial in the file name, else the
file's stem); the images in the file's folder or in $TOOLPATH_POPE_IMAGES. A bad line, a repeated
question_id or a missing image stops the load with the file, line and what is wrong.
"""

from __future__ import annotations

import os
import random
from collections import Counter, defaultdict
from pathlib import Path

from . import BenchmarkDataError, Record, read_json_lines
from .pope_sources import SOURCES, KnownImage, known_images, vocabulary

SPLITS = ("random", "popular", "adversarial")
POSITIVES = 3  # per image, as POPE samples them
IMAGES_PER_SOURCE = 100
IMAGES_ENV = "TOOLPATH_POPE_IMAGES"


def question(name: str) -> str:
    article = "an" if name[0] in "aeiou" else "a"
    return f"Is there {article} {name} in the image?"


def statistics(images: list[KnownImage]) -> tuple[list[str], dict[str, list[str]]]:
    """(names by frequency, most frequent first; per name, the names co-occurring with it, most often first)
    over a set of images of one source."""
    freq: Counter = Counter()
    co: dict[str, Counter] = defaultdict(Counter)
    for im in images:
        names = im.objects()
        freq.update(names)
        for a in names:
            co[a].update(b for b in names if b != a)
    by_freq = sorted(freq, key=lambda n: (-freq[n], n))
    return by_freq, {a: sorted(c, key=lambda n: (-c[n], n)) for a, c in co.items()}


def image_questions(image: KnownImage, split: str, seed: int, by_freq: list[str],
                    co: dict[str, list[str]]) -> list[tuple[str, str]]:
    """(object name, label) in asking order: a positive, then its negative, up to POSITIVES times."""
    rng = random.Random(f"pope:{seed}:{split}:{image.id}")
    names = image.objects()
    rng.shuffle(names)
    taken = image.true_names()
    vocab = vocabulary(image.source)
    out: list[tuple[str, str]] = []
    for pos in names[:POSITIVES]:
        out.append((pos, "yes"))
        candidates = {"random": [], "popular": by_freq, "adversarial": co.get(pos, [])}[split]
        neg = next((n for n in candidates if n not in taken), None)
        if neg is None:
            free = [n for n in vocab if n not in taken]
            if not free:
                break
            neg = rng.choice(free)
        taken.add(neg)
        out.append((neg, "no"))
    return out


def generated_records(seed: int, splits: tuple[str, ...] = SPLITS,
                      per_source: int = IMAGES_PER_SOURCE) -> list[Record]:
    """The generated POPE set: for each split, each source's images with their questions."""
    out = []
    for source in SOURCES:
        images = known_images(source, per_source, seed)
        by_freq, co = statistics(images)
        for split in splits:
            for im in images:
                out.extend(image_records(im, split, seed, by_freq, co, source))
    return out


def image_records(image: KnownImage, split: str, seed: int, by_freq: list[str], co: dict[str, list[str]],
                  source: str) -> list[Record]:
    """One image's questions of a split as records (their `source` names the set the image is from)."""
    return [Record(f"{split}-{image.id}-q{k}", split, {
                "question": question(name), "object": name, "label": label, "image": image.path,
                "image_id": image.id, "source": source, "split": split})
            for k, (name, label) in enumerate(image_questions(image, split, seed, by_freq, co))]


def split_of(path: Path) -> str:
    stem = path.stem.lower()
    return next((s for s in SPLITS if s in stem), path.stem)


def read_pope_file(path: Path, images: Path | None = None) -> list[Record]:
    """The records of one POPE JSONL file; its images under `images` (else $TOOLPATH_POPE_IMAGES, else the
    file's folder)."""
    env = os.environ.get(IMAGES_ENV, "").strip()
    root = images or (Path(env).expanduser() if env else path.parent)
    split = split_of(path)
    out, seen = [], {}
    for n, item in read_json_lines(path, "POPE file", "POPE files are JSON lines: one object a line"):
        problem = _problem(item)
        if problem:
            raise BenchmarkDataError(f"{path}:{n}: {problem}")
        qid = str(item["question_id"])
        if qid in seen:
            raise BenchmarkDataError(f"{path}:{n}: question_id {qid} repeats line {seen[qid]}")
        seen[qid] = n
        image = root / item["image"]
        if not image.is_file():
            raise BenchmarkDataError(f"{path}:{n}: image not found: {image} (put the images in the file's folder "
                                     f"or set {IMAGES_ENV} to their folder)")
        out.append(Record(f"{path.stem}-{qid}", split, {
            "question": item["text"], "label": item["label"].strip().lower(), "image": str(image.resolve()),
            "image_id": item["image"], "source": path.name, "split": split, "question_id": item["question_id"]}))
    if not out:
        raise BenchmarkDataError(f"{path}: no questions in the file")
    return out


def _problem(item) -> str | None:
    if not isinstance(item, dict):
        return f"expected a JSON object, got {type(item).__name__}"
    missing = [k for k in ("question_id", "image", "text", "label") if k not in item]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    if not isinstance(item["image"], str) or not item["image"].strip():
        return "image: expected a file name"
    if not isinstance(item["text"], str) or not item["text"].strip():
        return "text: expected the question"
    if not isinstance(item["label"], str) or item["label"].strip().lower() not in ("yes", "no"):
        return f"label: expected yes or no, got {item['label']!r}"
    return None


def pope_files(path: Path) -> list[Path]:
    """A POPE file, or the POPE files in a folder (*.json and *.jsonl), in name order."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl") and p.is_file())
        if not files:
            raise BenchmarkDataError(f"{path}: no POPE files (*.json, *.jsonl) in the folder")
        return files
    if not path.is_file():
        raise BenchmarkDataError(f"POPE file not found: {path}")
    return [path]

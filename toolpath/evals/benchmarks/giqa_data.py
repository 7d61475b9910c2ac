"""GIQA's records: a generated set (clean pictures with 1-3 planted distortions, giqa_plant.py) or a GIQA-Bench
file (`--data`).

Generated, deterministic by seed: the edit suite's rendered scenes (always here: drawn by code), plus photos
from $TOOLPATH_GIQA_PHOTOS (a folder of PNG/JPEG files, e.g. the MindCube sample's scene images; scaled to at
most 512 px). easy-vqa's 64 px pictures are too small to hold a distortion in one part only. Per image:
  des       "describe the quality with boxes"; truth: the planted regions
  yes_no    "is there <type> in <box>?" twice: a planted box and its type (yes), and a planted or clean box
            with another type (no)
  worse     "which region is worse, A <box> or B <box>?": a planted box against a clean box of its size
  kind      "what kind of distortion is in <box>?", the six types as choices A-F
The pictures are written once under $TOOLPATH_HOME/benchmarks/giqa/seed<seed>/.

GIQA-Bench file (JSON lines, one item a line; images relative to the file's folder):
  {"id": "...", "image": "img/001.png", "task": "des", "regions": [{"type": "blur", "box": [x0, y0, x1, y1]}]}
  {"id": "...", "image": "...", "task": "yes_no", "question": "...", "answer": "yes"}
  {"id": "...", "image": "...", "task": "choice", "question": "...", "choices": ["...", "..."], "answer": "B"}
types are those of distortion_tiles.TYPES.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np

from ...paths import home
from ...tools.image.distortion_tiles import TYPES
from ...tools.image.grounded_quality import WORDS
from . import BenchmarkDataError, Record, read_json_lines
from .giqa_plant import plant, random_boxes, structure

PHOTOS_ENV = "TOOLPATH_GIQA_PHOTOS"
N_SCENES = 30
MAX_PHOTOS = 60
MAX_SIDE = 512
LETTERS = "ABCDEF"
TASKS = ("des", "yes_no", "choice")
BLUR_STRUCTURE = 4e-3  # a blur is planted only where the picture has edges for it to soften


def box_text(box) -> str:
    return f"<box>[{', '.join(str(int(v)) for v in box)}]</box>"


def source_images(seed: int) -> list[tuple[str, np.ndarray]]:
    """(name, H×W×3 uint8) of the set: the edit suite's scenes, then the photos folder's pictures."""
    from PIL import Image

    from .edits.generation import make_task
    from .edits.scene import input_image

    out = [(f"scene{i:03d}", np.asarray(input_image(make_task(seed, i)))) for i in range(N_SCENES)]
    folder = os.environ.get(PHOTOS_ENV, "").strip()
    if folder:
        files = sorted(p for p in Path(folder).expanduser().rglob("*") if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
        if not files:
            raise BenchmarkDataError(f"{PHOTOS_ENV}={folder}: no PNG or JPEG pictures there")
        random.Random(seed).shuffle(files)
        for p in files[:MAX_PHOTOS]:
            im = Image.open(p).convert("RGB")
            scale = MAX_SIDE / max(im.size)
            if scale < 1:
                im = im.resize((round(im.width * scale), round(im.height * scale)), Image.LANCZOS)
            out.append((f"photo-{p.stem}", np.asarray(im)))
    return out


def distorted(name: str, clean: np.ndarray, seed: int) -> tuple[np.ndarray, list[dict]]:
    """The picture with 1-3 planted distortions of distinct types, and their truth ({"type", "box", "severity"})."""
    rng = np.random.default_rng(_seed(seed, name))
    h, w = clean.shape[:2]
    boxes = random_boxes(rng, w, h, int(rng.integers(1, 4)))
    kinds = [str(k) for k in rng.permutation(TYPES)]
    out, truth = clean, []
    for box in boxes:
        kind = next(k for k in kinds if k != "blur" or structure(clean, box) >= BLUR_STRUCTURE)
        kinds.remove(kind)
        severity = round(float(rng.uniform(0.3, 1.0)), 2)
        out = plant(out, kind, severity, box, seed=int(rng.integers(1 << 30)))
        truth.append({"type": kind, "box": box, "severity": severity})
    return out, truth


def _seed(seed: int, name: str) -> int:
    import zlib

    return zlib.crc32(f"giqa:{seed}:{name}".encode())


def clean_box(truth: list[dict], size: list[int], w: int, h: int, rng: random.Random) -> list[int] | None:
    """A box of `size` that overlaps no planted region, or None when none fits."""
    bw, bh = size
    for _ in range(100):
        x0, y0 = rng.randrange(0, w - bw + 1, 8), rng.randrange(0, h - bh + 1, 8)
        b = [x0, y0, x0 + bw, y0 + bh]
        if all(b[2] <= t["box"][0] or t["box"][2] <= b[0] or b[3] <= t["box"][1] or t["box"][3] <= b[1]
               for t in truth):
            return b
    return None


def questions(name: str, path: str, truth: list[dict], w: int, h: int, seed: int) -> list[Record]:
    rng = random.Random(_seed(seed, name))
    base = {"image": path, "size": [w, h]}
    out = [Record(f"giqa-{seed}-{name}-des", "des", {**base, "task": "des", "regions": truth})]
    t = rng.choice(truth)
    out.append(Record(f"giqa-{seed}-{name}-yes", "yes_no", {
        **base, "task": "yes_no", "answer": "yes",
        "question": f"Is there {WORDS[t['type']]} in the region {box_text(t['box'])}? Answer yes or no."}))
    other = rng.choice([k for k in TYPES if k != t["type"]])
    out.append(Record(f"giqa-{seed}-{name}-no", "yes_no", {
        **base, "task": "yes_no", "answer": "no",
        "question": f"Is there {WORDS[other]} in the region {box_text(t['box'])}? Answer yes or no."}))
    spare = clean_box(truth, [t["box"][2] - t["box"][0], t["box"][3] - t["box"][1]], w, h, rng)
    if spare is not None:
        first = rng.random() < 0.5
        a, b = (t["box"], spare) if first else (spare, t["box"])
        out.append(Record(f"giqa-{seed}-{name}-worse", "worse", {
            **base, "task": "choice", "answer": "A" if first else "B", "choices": [box_text(a), box_text(b)],
            "question": f"Which region has worse quality? A: {box_text(a)} B: {box_text(b)}. Answer A or B."}))
    listed = " ".join(f"{LETTERS[i]}: {WORDS[k]}" for i, k in enumerate(TYPES))
    out.append(Record(f"giqa-{seed}-{name}-kind", "kind", {
        **base, "task": "choice", "answer": LETTERS[TYPES.index(t["type"])], "choices": [WORDS[k] for k in TYPES],
        "question": f"What kind of distortion is in the region {box_text(t['box'])}? {listed}. "
                    "Answer with the letter."}))
    return out


def generated_records(seed: int) -> list[Record]:
    """The generated set of a seed: its pictures written under $TOOLPATH_HOME (once) and their records."""
    from PIL import Image

    folder = home() / "benchmarks" / "giqa" / f"seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, clean in source_images(seed):
        image, truth = distorted(name, clean, seed)
        path = folder / f"{name}.png"
        if not path.is_file() or not np.array_equal(np.asarray(Image.open(path).convert("RGB")), image):
            tmp = path.with_suffix(f".{os.getpid()}.tmp.png")
            Image.fromarray(image).save(tmp)
            tmp.replace(path)
        out.extend(questions(name, str(path), truth, image.shape[1], image.shape[0], seed))
    return out


def _check_regions(regions, where: str) -> list[dict]:
    if not isinstance(regions, list):
        raise BenchmarkDataError(f"{where}: regions must be a list of {{type, box}}, got {regions!r}")
    for r in regions:
        box = r.get("box") if isinstance(r, dict) else None
        if (not isinstance(r, dict) or r.get("type") not in TYPES or not isinstance(box, list) or len(box) != 4
                or not all(isinstance(v, (int, float)) for v in box) or not (box[0] < box[2] and box[1] < box[3])):
            raise BenchmarkDataError(f"{where}: each region needs a type ({', '.join(TYPES)}) and a box "
                                     f"[x0, y0, x1, y1] with x0 < x1, y0 < y1; got {r!r}")
    return regions


def read_file(path: Path) -> list[Record]:
    """A GIQA-Bench JSON-lines file (see the module docstring), each line checked; images must exist."""
    hint = 'one item a line: {"id", "image", "task": "des"|"yes_no"|"choice", ...}'
    out, seen = [], set()
    for n, item in read_json_lines(path, "GIQA-Bench file", hint):
        where = f"{path}:{n}"
        if not isinstance(item, dict) or item.get("task") not in TASKS or not item.get("id") or not item.get("image"):
            raise BenchmarkDataError(f"{where}: expected an object with id, image and task ({', '.join(TASKS)})")
        if item["id"] in seen:
            raise BenchmarkDataError(f"{where}: id {item['id']!r} repeats an earlier line")
        seen.add(item["id"])
        image = (path.parent / item["image"]).resolve()
        if not image.is_file():
            raise BenchmarkDataError(f"{where}: image {item['image']!r} not found (looked at {image})")
        data = {**item, "image": str(image)}
        if item["task"] == "des":
            data["regions"] = _check_regions(item.get("regions"), where)
        elif item["task"] == "yes_no" and item.get("answer") not in ("yes", "no"):
            raise BenchmarkDataError(f"{where}: a yes_no item's answer must be yes or no, got {item.get('answer')!r}")
        elif item["task"] == "choice" and not (isinstance(item.get("choices"), list)
                                               and isinstance(item.get("answer"), str)
                                               and item["answer"] in LETTERS[:len(item["choices"])]):
            raise BenchmarkDataError(f"{where}: a choice item needs choices (a list) and answer, a letter of them")
        if item["task"] != "des" and not isinstance(item.get("question"), str):
            raise BenchmarkDataError(f"{where}: a {item['task']} item needs its question")
        out.append(Record(str(item["id"]), item["task"], data))
    if not out:
        raise BenchmarkDataError(f"{path}: no items")
    return out

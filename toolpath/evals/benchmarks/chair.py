"""CHAIR (Rohrbach, Hendricks et al. 2018): object hallucination in image captions.

`toolpath eval chair` asks the model to describe one image per task (react agent, no tools; PROMPT), finds
the objects its caption mentions and checks them against the image's objects (chair_metrics). A sample's score
is 1 when its caption mentions no object that is not there, so the eval's score is 1 − CHAIR_s; its `metrics`
are CHAIR_s, CHAIR_i, recall and mentions per caption, pooled over the set and per category (chair_figures).
Both scoring modes score the same (there is one published scorer, followed as chair_metrics says).

Data:
  default        a generated set, offline: easy-vqa test images and the shape scenes (pope_sources), 100 of
                 each (categories easy-vqa, scenes), deterministic by seed; shape vocabulary in chair_metrics
  --data PATH    COCO instance annotations (instances_val2014.json), CHAIR's 80 categories and synonyms
                 (chair_coco); images in the file's folder or $TOOLPATH_CHAIR_IMAGES; one category, coco
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ...spec import TaskSpec
from . import Benchmark, BenchmarkDataError, Record, Score, data_path, pick, task_id
from .chair_coco import IMAGES_ENV, coco_mentions, coco_records
from .chair_metrics import chair_counts, chair_figures, shape_accepts, shape_mentions
from .pope_sources import SOURCES, generated_folders, known_images

PROMPT = "Describe the image."
IMAGES_PER_SOURCE = 100
DEFAULT_MODEL = "local:tiny-vlm"


def generated_records(seed: int, per_source: int = IMAGES_PER_SOURCE) -> list[Record]:
    out = []
    for source in SOURCES:
        for im in known_images(source, per_source, seed):
            out.append(Record(f"{im.id}", source, {"image": im.path, "image_id": im.id, "source": source,
                                                   "objects": [list(o) for o in im.shapes]}))
    return out


def _same_class(obj: str, mention: str) -> bool:
    return obj == mention


def _words(mention) -> str:
    """A mention as words: a COCO class, or a shape's "colour shape"."""
    return mention if isinstance(mention, str) else " ".join(w for w in mention if w)


def caption_counts(record: Record, caption: str) -> tuple[dict[str, float], list[str]]:
    """The caption's CHAIR counts for the record's image, and its hallucinated mentions as words."""
    if record.data["source"] == "coco":
        mentions, objects, accepts = coco_mentions(caption), list(record.data["objects"]), _same_class
    else:
        mentions, objects = shape_mentions(caption), [tuple(o) for o in record.data["objects"]]
        accepts = shape_accepts(record.data["source"])
    bad = [_words(m) for m in mentions if not any(accepts(o, m) for o in objects)]
    return chair_counts(mentions, objects, accepts), bad


class CHAIR(Benchmark):
    name = "chair"
    description = "CHAIR: objects a caption mentions that are not in the image (CHAIR_s, CHAIR_i)"
    model = DEFAULT_MODEL

    def __init__(self, data: str | Path | None = None):
        self.data = Path(data).expanduser() if data else None

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        if self.data is None:
            try:
                return pick(generated_records(seed), limit, seed)
            except RuntimeError as err:  # easy-vqa missing
                raise BenchmarkDataError(str(err)) from None
        if not self.data.is_file():
            raise BenchmarkDataError(f"COCO instance annotations not found: {self.data} (--data takes a file such "
                                     "as annotations/instances_val2014.json)")
        return pick(coco_records(self.data), limit, seed)

    def data_folders(self) -> list[Path]:
        """Where its images may be besides its file's folder (evals/data_reach.py): $TOOLPATH_CHAIR_IMAGES, and
        the generated set's folders when it reads no file."""
        generated = generated_folders() if self.data is None else []
        return [p for p in [data_path(IMAGES_ENV)] if p is not None] + generated

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        return TaskSpec.model_validate({
            "id": task_id(record.id), "instruction": PROMPT, "inputs": {"images": [record.data["image"]]},
            "agent": {"name": "react"}, "tools": [], "limits": {"max_steps": 2}, "model": model or self.model,
            "evaluator": None,
            "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id}})

    def score(self, record: Record, answer: str | None) -> Score:
        counts, bad = caption_counts(record, answer or "")
        why = (f"hallucinated: {', '.join(bad)}" if bad else "no hallucinated object") + \
              f" ({int(counts['mentions'])} mentions, {int(counts['covered'])}/{int(counts['objects'])} objects named)"
        return Score(0.0 if bad else 1.0, counts, why)

    def aggregate(self, metrics: list[dict[str, float]]) -> dict[str, float]:
        return chair_figures(metrics)

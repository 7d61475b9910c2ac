"""Scoring GIQA-DES: the regions a description names (a distortion word before each `<box>[x0, y0, x1, y1]</box>`),
matched one to one to the true regions by IoU (the Hungarian assignment, scipy's linear_sum_assignment).

- box mIoU: the sum of the matched pairs' IoU over the larger of the two counts, so a missed region and an
  invented one both cost; 1.0 for no regions said of an image with none;
- type accuracy: the share of true regions whose matched region overlaps them and names their type.
"""

from __future__ import annotations

import re

from ...tools.image.distortion_tiles import TYPES

# The words a description may name each type with (GIQA-DES is free text; these are the usual ones).
TYPE_WORDS = {
    "jpeg": r"jpe?g|block(?:ing|y|iness)?|compression|compressed",
    "overexposure": r"over[- ]?expos\w*|blown[- ]?out|overexposed|too bright|washed[- ]?out",
    "underexposure": r"under[- ]?expos\w*|underexposed|too dark|dark",
    "color_cast": r"colou?r[- ]?cast|tint\w*|cast",
    "noise": r"nois\w*|grain\w*",
    "blur": r"blur\w*|out[- ]of[- ]focus|defocus\w*|soft",
}
_BOX = re.compile(r"<box>\s*\[?\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*"
                  r"(-?\d+(?:\.\d+)?)\s*\]?\s*</box>", re.IGNORECASE)


def read_regions(text: str | None) -> list[tuple[str | None, list[float]]]:
    """(type, box) for each box a description holds, the type named by the last distortion word between the
    previous box and this one (None when none is)."""
    out: list[tuple[str | None, list[float]]] = []
    start = 0
    for m in _BOX.finditer(text or ""):
        before = text[start:m.start()].lower()
        found = [(w.start(), kind) for kind, words in TYPE_WORDS.items()
                 for w in re.finditer(rf"\b(?:{words})\b", before)]
        kind = max(found)[1] if found else None
        out.append((kind, [float(v) for v in m.groups()]))
        start = m.end()
    return out


_LIST_BOX = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")


def boxes_in(text: str) -> list[list[int]]:
    """The [x0, y0, x1, y1] boxes a question names, in order."""
    return [[int(v) for v in m] for m in _LIST_BOX.findall(text or "")]


def iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def match(said: list[tuple[str | None, list[float]]], truth: list[dict]) -> dict[str, float]:
    """box mIoU, type accuracy and the counts, for regions said against true regions ({"type", "box"})."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    n_said, n_true = len(said), len(truth)
    if n_true == 0:
        return {"miou": float(n_said == 0), "type_acc": 1.0, "said": n_said, "true": 0}
    if n_said == 0:
        return {"miou": 0.0, "type_acc": 0.0, "said": 0, "true": n_true}
    m = np.array([[iou(s[1], t["box"]) for t in truth] for s in said])
    rows, cols = linear_sum_assignment(-m)
    total = float(m[rows, cols].sum())
    typed = sum(1 for r, c in zip(rows, cols) if m[r, c] > 0 and said[r][0] == truth[c]["type"])
    return {"miou": total / max(n_said, n_true), "type_acc": typed / n_true, "said": n_said, "true": n_true}


def description_of(regions: list[dict]) -> str:
    """A GIQA-DES text for regions ({"type", "box"}), in the words read_regions reads: the truth written out."""
    if not regions:
        return "No localized distortion."
    words = {t: t.replace("_", " ") for t in TYPES} | {"jpeg": "JPEG blocking"}
    return "; ".join(f"{words[r['type']]} <box>[{', '.join(str(v) for v in r['box'])}]</box>" for r in regions) + "."

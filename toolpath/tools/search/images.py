"""The image index: multi-scale window descriptors, so a crop or a zoom of an indexed image finds it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ...redact import redact
from ..corpus import Corpus, open_image, walk
from ..registry import ToolError
from .cache import cache_dir, cached_index, stats

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif")

# Image search: multi-scale window descriptors

_SIDE = 256  # images are described at this longest side: enough detail, fast to index
_WINDOW_FRACTIONS = (1.0, 0.75, 0.5, 0.33)  # window side / image side; each axis on its own, so aspect may differ
_H_BINS, _S_BINS, _V_BINS = 12, 4, 4
_THUMB = 8  # grayscale thumbnail side
_GRID, _ORIENT = 4, 8  # gradient histograms: GRID x GRID cells, ORIENT orientations each
_WEIGHTS = (1.0, 1.0, 1.0)  # colour, thumbnail, gradients: equal say in the cosine


def _load_small(path: Path, side: int = _SIDE):
    """An RGB image no larger than side x side, read as a corpus file (bounded: corpus.open_image)."""
    with open_image(path) as im:
        return _small(im, side)


def _small(im, side: int = _SIDE):
    """`im` as RGB no larger than side x side. JPEG draft mode decodes big photos at reduced size directly."""
    from PIL import Image

    im.draft("RGB", (side, side))
    im = im.convert("RGB")
    im.thumbnail((side, side), Image.BILINEAR)
    return im


def _positions(frac: float) -> list[float]:
    """Start offsets (fractions of the side) of windows of one size: overlapping by two thirds, ends included."""
    if frac >= 1.0:
        return [0.0]
    n = max(2, round((1.0 - frac) / (frac / 3)) + 1)
    return [i * (1.0 - frac) / (n - 1) for i in range(n)]


def _windows(w: int, h: int) -> list[tuple[int, int, int, int]]:
    boxes = set()
    for fx in _WINDOW_FRACTIONS:
        for fy in _WINDOW_FRACTIONS:
            if max(fx, fy) / min(fx, fy) > 2.0:  # very thin slices are not what a crop looks like
                continue
            for ox in _positions(fx):
                for oy in _positions(fy):
                    x0, y0 = round(ox * w), round(oy * h)
                    boxes.add((x0, y0, max(x0 + 4, round((ox + fx) * w)), max(y0 + 4, round((oy + fy) * h))))
    return sorted(boxes)


def _unit(v):
    import numpy as np

    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, 1e-8)


def _integral(a):
    """Summed-area table with a zero row and column in front: any box sum is four look-ups."""
    import numpy as np

    out = np.zeros((a.shape[0] + 1, a.shape[1] + 1) + a.shape[2:], dtype=np.float64)
    out[1:, 1:] = a.cumsum(0).cumsum(1)
    return out


def _cell_sums(table, boxes, grid: int):
    """Sums over a grid x grid split of every box at once: (boxes, grid, grid, channels)."""
    import numpy as np

    k = np.arange(grid + 1) / grid
    xs = np.rint(boxes[:, 0:1] + (boxes[:, 2:3] - boxes[:, 0:1]) * k).astype(np.int64)  # (n, grid + 1)
    ys = np.rint(boxes[:, 1:2] + (boxes[:, 3:4] - boxes[:, 1:2]) * k).astype(np.int64)
    y0, y1 = ys[:, :-1, None], ys[:, 1:, None]
    x0, x1 = xs[:, None, :-1], xs[:, None, 1:]
    sums = table[y1, x1] - table[y0, x1] - table[y1, x0] + table[y0, x0]
    area = ((y1 - y0) * (x1 - x0))[..., None]
    return sums, area


def _describe(im, boxes):
    """One L2-normalised descriptor per box: colour histogram, thumbnail, gradient-orientation grid.

    The thumbnail and the gradient grid come from summed-area tables, so hundreds of windows cost little more
    than one; only the colour histogram is counted window by window.
    """
    import numpy as np

    boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)
    left, top = boxes[:, :2].min(0)
    right, bottom = boxes[:, 2:].max(0)
    if (left, top, right, bottom) != (0, 0, im.width, im.height):  # work only on the part the boxes cover
        im = im.crop((int(left), int(top), int(right), int(bottom)))
        boxes = boxes - np.array([left, top, left, top])
    hsv = np.asarray(im.convert("HSV"), dtype=np.int32)
    colour = (hsv[..., 0] * _H_BINS // 256) * (_S_BINS * _V_BINS) + (hsv[..., 1] * _S_BINS // 256) * _V_BINS \
        + hsv[..., 2] * _V_BINS // 256
    nbins = _H_BINS * _S_BINS * _V_BINS
    c = np.stack([np.bincount(colour[y0:y1, x0:x1].ravel(), minlength=nbins) for x0, y0, x1, y1 in boxes])
    c = np.sqrt(c / np.maximum(c.sum(1, keepdims=True), 1))  # Hellinger: big uniform walls do not swamp the rest

    gray = np.asarray(im.convert("L"), dtype=np.float64)
    sums, area = _cell_sums(_integral(gray[..., None]), boxes, _THUMB)
    t = (sums / np.maximum(area, 1)).reshape(len(boxes), -1)
    t = t - t.mean(1, keepdims=True)  # brightness-invariant: only the layout of light and dark counts

    gy, gx = np.gradient(gray)
    orient = ((np.arctan2(gy, gx) % np.pi) / np.pi * _ORIENT).astype(np.int64) % _ORIENT
    weighted = np.zeros(gray.shape + (_ORIENT,))
    np.put_along_axis(weighted, orient[..., None], np.hypot(gx, gy)[..., None], axis=2)
    g, _ = _cell_sums(_integral(weighted), boxes, _GRID)
    g = np.maximum(g.reshape(len(boxes), -1), 0.0)  # differences of large sums can come out at -1e-12
    g = np.sqrt(g / np.maximum(g.sum(1, keepdims=True), 1e-6))

    parts = [w * _unit(p.astype(np.float32)) for w, p in zip(_WEIGHTS, (c, t, g))]
    return _unit(np.concatenate(parts, axis=1))


class _ImageIndex:
    def __init__(self, paths: list[str], vectors, owner, boxes, sizes):
        self.paths = paths  # indexed images
        self.vectors = vectors  # (windows, D) float16, unit rows
        self.owner = owner  # (windows,) which image each window belongs to
        self.boxes = boxes  # (windows, 4) window in the image's original pixels
        self.sizes = sizes  # (images, 2) original width, height

    def scores(self, query_vec):
        """Per image: the best window's cosine with the query, and which window that was."""
        import numpy as np

        sims = np.empty(len(self.vectors), dtype=np.float32)
        for start in range(0, len(self.vectors), 16384):  # float16 on disk and in memory; float32 only per chunk
            sims[start:start + 16384] = self.vectors[start:start + 16384].astype(np.float32) @ query_vec
        best = np.full(len(self.paths), -np.inf, dtype=np.float32)
        np.maximum.at(best, self.owner, sims)
        arg = np.full(len(self.paths), -1)
        hit = sims >= best[self.owner]  # the window(s) that reached the maximum; keep the last
        arg[self.owner[hit]] = np.nonzero(hit)[0]
        return best, arg


def _build_image_index(corpus: Corpus, out: Path) -> tuple[_ImageIndex, list[str]]:
    import numpy as np
    from PIL import Image

    paths, vectors, owner, boxes, sizes, notes = [], [], [], [], [], list(corpus.skipped)
    for path in corpus.files:
        try:
            with open_image(path) as original:
                size = original.size
                im = _small(original)
        except (OSError, ValueError, Image.DecompressionBombError) as err:
            notes.append(f"{path.name}: not a readable image ({err})")
            continue
        wins = _windows(im.width, im.height)
        sx, sy = size[0] / im.width, size[1] / im.height
        vectors.append(_describe(im, wins).astype(np.float16))
        owner += [len(paths)] * len(wins)
        boxes += [[round(x0 * sx), round(y0 * sy), round(x1 * sx), round(y1 * sy)] for x0, y0, x1, y1 in wins]
        sizes.append(size)
        paths.append(str(path))
    if not paths:
        raise ToolError("image_search: no readable images in the corpus"
                        + (f" ({'; '.join(notes[:3])})" if notes else ""))
    index = _ImageIndex(paths, np.concatenate(vectors), np.asarray(owner, dtype=np.int32),
                        np.asarray(boxes, dtype=np.int32), np.asarray(sizes, dtype=np.int32))
    np.savez(out / "windows.npz", vectors=index.vectors, owner=index.owner, boxes=index.boxes, sizes=index.sizes)
    notes = [redact(note) for note in notes]  # an error may quote the file's own bytes
    (out / "images.json").write_text(json.dumps({"paths": paths, "notes": notes}))
    stats["image_builds"] += 1
    return index, notes


def image_index(root: Path) -> tuple[_ImageIndex, list[str]]:
    """The window index of an image folder: from memory, else from the disk cache, else built (and cached)."""
    corpus = walk(root, IMAGE_SUFFIXES)
    if not corpus.files:
        raise ToolError(f"image_search: {root} has no {' '.join(IMAGE_SUFFIXES)} files to search"
                        + (f" (skipped: {'; '.join(corpus.skipped[:3])})" if corpus.skipped else ""))
    params = {"side": _SIDE, "fractions": _WINDOW_FRACTIONS, "bins": [_H_BINS, _S_BINS, _V_BINS], "thumb": _THUMB,
              "grid": [_GRID, _ORIENT], "weights": _WEIGHTS}
    folder = cache_dir("image", corpus, params)
    return cached_index(folder, "images.json", _load_image_index, lambda tmp: _build_image_index(corpus, tmp),
                        "image_search")


def _load_image_index(folder: Path) -> tuple[_ImageIndex, list[str]]:
    import numpy as np

    meta = json.loads((folder / "images.json").read_text())
    with np.load(folder / "windows.npz") as z:
        return _ImageIndex(meta["paths"], z["vectors"], z["owner"], z["boxes"], z["sizes"]), meta["notes"]


_REFINE_TOP = 6  # how many best images get a finer search around their best window at query time
_REFINE_SCALES = (0.8, 0.9, 1.0, 1.12, 1.25)
_REFINE_SHIFTS = (-1 / 6, 0.0, 1 / 6)  # of the window's size: the index's windows overlap by two thirds


def _refine_boxes(box, w: int, h: int, query_aspect: float) -> list[tuple[int, int, int, int]]:
    """Windows around one box: a little larger and smaller, shifted, in its own shape and in the query's shape."""
    import math

    x0, y0, x1, y1 = box
    cx, cy, bw, bh = (x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0
    side = math.sqrt(bw * bh)
    shapes = [(bw, bh), (side * math.sqrt(query_aspect), side / math.sqrt(query_aspect))]
    boxes = set()
    for s in _REFINE_SCALES:
        for sw, sh in shapes:
            ww, hh = min(w, sw * s), min(h, sh * s)
            for dx in _REFINE_SHIFTS:
                for dy in _REFINE_SHIFTS:
                    left = min(max(0.0, cx + dx * ww - ww / 2), w - ww)
                    top = min(max(0.0, cy + dy * hh - hh / 2), h - hh)
                    b = (round(left), round(top), round(left + ww), round(top + hh))
                    if b[2] - b[0] >= 4 and b[3] - b[1] >= 4:
                        boxes.add(b)
    return sorted(boxes)


def _refine(index: _ImageIndex, query, qvec, best, boxes) -> None:
    """Re-score the best few images by a denser search around their best window (in place).

    The index's windows sit on a coarse grid, so a crop that straddles two windows scores lower than it should,
    and a near-duplicate view of the same room can overtake the true image; a local search fixes most of that
    for the price of describing about 90 windows per candidate.
    """
    import numpy as np

    for i in np.argsort(-best, kind="stable")[:_REFINE_TOP]:
        try:
            im = _load_small(Path(index.paths[i]))
        except OSError:  # the file changed or vanished since indexing: keep its coarse score
            continue
        W, H = (int(v) for v in index.sizes[i])
        sx, sy = im.width / W, im.height / H
        x0, y0, x1, y1 = (int(v) for v in boxes[i])
        cand = _refine_boxes((x0 * sx, y0 * sy, x1 * sx, y1 * sy), im.width, im.height, query.width / query.height)
        sims = _describe(im, cand) @ qvec
        j = int(np.argmax(sims))
        if sims[j] > best[i]:
            best[i] = sims[j]
            bx0, by0, bx1, by1 = cand[j]
            boxes[i] = [round(bx0 / sx), round(by0 / sy), round(bx1 / sx), round(by1 / sy)]

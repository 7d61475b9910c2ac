"""Stages "find_text" (text removal and replacement) and "write" (text replacement and addition).

find_text: state.text_boxes = the lines found, (x0, y0, x1, y1, text read), each box tightened to its ink;
state.mask = that ink, grown 2 px (what "fill" then repaints); state.info["text_ink"] = each line's ink colour.
When the subtask names the text (params["old"] for a replacement, params["text"] for a removal) only the
lines that match it are kept, case and punctuation ignored, small misreads tolerated.
- `ocr_rapid`: RapidOCR (PyPI rapidocr-onnxruntime, which ships its ONNX models): detection and reading.
- `ocr_tesseract`: Debian's tesseract binary (apt-get install tesseract-ocr), sparse-text mode, words merged
  into lines.
- `text_mser`: MSER regions that look like characters (size, fill, contrast with their surroundings),
  grouped into lines. Reads nothing (text ""): it finds any text, and picks the named one only by the shape
  of its line (the aspect the text has in the writing font), refusing when two lines fit alike.

write
- `write_text`: PIL with a TrueType font from the system (DejaVu Sans Bold, else another sans, else PIL's
  built-in scalable font). A replacement is sized so the old text would fill the old box, and starts where
  the old one did (same left edge and line); an addition goes in its position's cell of a 3×3 grid, 5 % of
  the shorter side from the edges, 10 % of the image height tall (smaller if it does not fit the cell).
  Colour: params["color"], else the old text's ink, else black or white, whichever contrasts more.
- `write_text_cv2`: the same placement with OpenCV's Hershey font; cheaper, plainer.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import io
import shutil
import subprocess

import cv2
import numpy as np
from PIL import Image, ImageDraw

from ...loaded_once import LoadedOnce
from .edit_base import COLORS, POSITIONS, EditError, EditState, EditTool, Subtask, register_edit_tool, text_query
from .features import delta_e_lab, distance_to, lab, require_color, require_image
from .fonts import font, font_path
from .quality import INK_DE, box_text_match, case_variants, check_find_text, check_write, dilate

FIND_KINDS = ("text_remove", "text_replace")
WRITE_KINDS = ("text_replace", "text_add")
MATCH_MIN = 0.7  # normalised-text similarity for a read to count as the named text
INK_GROW = 2


# ---- matching what the subtask names -----------------------------------------------------------------------

def _normal(text: str) -> str:
    return "".join(ch for ch in text.upper() if ch.isalnum())


def text_similarity(read: str, query: str, contained: float | None = 0.9) -> float:
    """1 for the same letters and digits (case and punctuation aside); `contained` when one contains the other
    (None: no such credit); else difflib's ratio. An edit tool looking for a sign's text wants the credit (OCR
    reads "SALE!" as "SALE 50%"); a grounder deciding whether a target is on screen must not get it, or a short
    fragment ("In") inside the query ("Window") counts as a match."""
    a, b = _normal(read), _normal(query)
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    if contained is not None and (b in a or a in b) and min(len(a), len(b)) >= 2:
        return contained
    return difflib.SequenceMatcher(None, a, b).ratio()


# ---- boxes → lines, ink ----------------------------------------------------------------------------------

def group_boxes(boxes: list[tuple[int, int, int, int]], gap: float, overlap: float = 0.5,
                height_ratio: float = 1.8) -> list[list[int]]:
    """Indices of boxes grouped into lines: two join when they overlap vertically by `overlap` of the smaller
    height, their heights are within `height_ratio`, and the horizontal gap is under `gap` × the taller."""
    parent = list(range(len(boxes)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            b = boxes[j]
            ha, hb = a[3] - a[1], b[3] - b[1]
            v = min(a[3], b[3]) - max(a[1], b[1])
            dx = max(a[0], b[0]) - min(a[2], b[2])
            if (v >= overlap * min(ha, hb) and max(ha, hb) <= height_ratio * max(min(ha, hb), 1)
                    and dx <= gap * max(ha, hb)):
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(boxes)):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda g: (min(boxes[i][1] for i in g), min(boxes[i][0] for i in g)))


def union_box(boxes) -> tuple[int, int, int, int]:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def ink_in_box(L: np.ndarray, box) -> np.ndarray:
    """The ink of one text line: pixels of the box (grown 2 px) far (ΔE > INK_DE) from the median colour of
    the band just outside it; H×W bool (empty when the box holds no contrast)."""
    h, w = L.shape[:2]
    x0, y0, x1, y1 = (int(v) for v in box[:4])
    X0, Y0, X1, Y1 = max(0, x0 - 2), max(0, y0 - 2), min(w, x1 + 2), min(h, y1 + 2)
    out = np.zeros((h, w), bool)
    if X1 <= X0 or Y1 <= Y0:
        return out
    frame = np.zeros((h, w), bool)
    frame[max(0, Y0 - 3):min(h, Y1 + 3), max(0, X0 - 3):min(w, X1 + 3)] = True
    frame[Y0:Y1, X0:X1] = False
    if not frame.any():
        return out
    bg = np.median(L[frame], axis=0)
    out[Y0:Y1, X0:X1] = distance_to(L[Y0:Y1, X0:X1], bg) > INK_DE
    return out


def plausible_reading(L: np.ndarray, box, text: str) -> bool:
    """Whether an OCR line is text rather than a shape read as a glyph ("@", "*", "O"): at least two letters
    or digits, and its box holds at least two separate pieces of ink."""
    if len(_normal(text)) < 2:
        return False
    ink = ink_in_box(L, box)
    if not ink.any():
        return False
    ys, xs = np.nonzero(ink)
    crop = ink[ys.min():ys.max() + 1, xs.min():xs.max() + 1].astype(np.uint8)
    n, _, stats, _ = cv2.connectedComponentsWithStats(crop, connectivity=8)
    return int((stats[1:, cv2.CC_STAT_AREA] >= 4).sum()) >= 2


def _found(state: EditState, subtask: Subtask, tool: str, lines: list[tuple[tuple[int, int, int, int], str]],
           **info) -> EditState:
    """The find_text result from (box, text) lines: keep the ones matching the subtask's text, tighten each
    box to its ink, and set the mask, the boxes and the ink colours."""
    query = text_query(subtask)
    read = [t for _, t in lines]
    L = lab(state.image)
    if tool != "text_mser":
        lines = [(b, t) for b, t in lines if plausible_reading(L, b, t)]
    if not lines:
        raise EditError(f"{tool}: no text found in the image" + (f" (read and dropped: {read})" if read else ""))
    if query:
        if tool == "text_mser":
            lines = _pick_by_shape(lines, query, L, tool)
        else:
            lines = [(b, t) for b, t in lines if text_similarity(t, query) >= MATCH_MIN]
            if not lines:
                raise EditError(f"{tool}: no text matching {query!r}; read: {', '.join(map(repr, read)) or 'nothing'}")
    mask = np.zeros(state.image.shape[:2], bool)
    boxes, inks = [], []
    for box, text in lines:
        ink = ink_in_box(L, box)
        if ink.sum() < 4:  # no contrast in the box: keep the box itself
            ink = np.zeros_like(ink)
            ink[box[1]:box[3], box[0]:box[2]] = True
        ys, xs = np.nonzero(ink)
        boxes.append((int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1, text))
        inks.append([int(v) for v in np.median(state.image[ink], axis=0)])
        mask |= ink
    return state.evolve(mask=dilate(mask, INK_GROW), text_boxes=boxes,
                        info={**state.info, "text_ink": inks,
                              tool: {"read": read, "kept": [b[4] for b in boxes], **info}})


def rendered_match(L: np.ndarray, box, text: str) -> float:
    """IoU of a line's ink with `text` rendered in the writing font and stretched to the line's box: a cheap
    way to tell two words of the same length apart without reading them (meaningful when the image's font
    is like ours; with another font every candidate scores about alike, and text_mser then refuses)."""
    ink = ink_in_box(L, box)
    x0, y0, x1, y1 = (int(v) for v in box[:4])
    if x1 - x0 < 2 or y1 - y0 < 2 or not ink.any():
        return 0.0
    f = font(64)
    left, t, r, b = f.getbbox(text)
    im = Image.new("L", (r - left, b - t), 0)
    ImageDraw.Draw(im).text((-left, -t), text, font=f, fill=255)
    glyphs = np.asarray(im.resize((x1 - x0, y1 - y0), Image.Resampling.BILINEAR)) > 127
    got = ink[y0:y1, x0:x1]
    return float((glyphs & got).sum() / max((glyphs | got).sum(), 1))


def _pick_by_shape(lines, query: str, L: np.ndarray, tool: str):
    """Without a reading: the line whose aspect fits `query` in the writing font and whose ink looks like it
    rendered there; an error when none fits or when two fit about as well."""
    scored = sorted(((box_text_match(b, query)
                      * (0.4 + 0.6 * max(rendered_match(L, b, v) for v in case_variants(query))),
                      b, t) for b, t in lines), key=lambda s: -s[0])
    best = scored[0]
    if best[0] < 0.3:
        raise EditError(f"{tool}: none of the {len(lines)} text lines has the shape of {query!r} (it reads nothing)")
    if len(scored) > 1 and scored[1][0] > best[0] - 0.1:
        raise EditError(f"{tool}: {len(lines)} text lines, and more than one has the shape of {query!r}; "
                        f"telling them apart needs OCR")
    return [(best[1], best[2])]


# ---- RapidOCR --------------------------------------------------------------------------------------------

_ENGINES = LoadedOnce("OCR engines")


def rapid_reason() -> str | None:
    if importlib.util.find_spec("rapidocr_onnxruntime") is None:
        return "needs the OCR engine: pip install rapidocr-onnxruntime (it ships its ONNX models)"
    return None


def _rapid_engine():
    def load():
        from rapidocr_onnxruntime import RapidOCR

        return RapidOCR()

    return _ENGINES.get("rapid", load)


def parse_rapid(result) -> tuple[list[tuple[tuple[int, int, int, int], str]], int]:
    """RapidOCR's [[quad, text, score], …] (or None) → ((box, text) lines, number of malformed entries)."""
    lines, bad = [], 0
    for entry in result or []:
        try:
            quad, text, score = entry
            pts = np.asarray(quad, np.float64).reshape(-1, 2)
            if not isinstance(text, str) or len(pts) < 3 or not np.isfinite(pts).all() or not np.isfinite(float(score)):
                raise ValueError
        except (TypeError, ValueError):
            bad += 1
            continue
        x0, y0 = np.floor(pts.min(0)).astype(int)
        x1, y1 = np.ceil(pts.max(0)).astype(int)
        lines.append(((max(0, int(x0)), max(0, int(y0)), int(x1), int(y1)), text.strip()))
    return lines, bad


def ocr_rapid(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "ocr_rapid")
    why = rapid_reason()
    if why:
        raise EditError(f"ocr_rapid: {why}")
    result, _ = _rapid_engine()(np.ascontiguousarray(image[..., ::-1]))  # the engine expects OpenCV's BGR
    h, w = image.shape[:2]
    lines, bad = parse_rapid(result)
    lines = [((x0, y0, min(w, x1), min(h, y1)), t) for (x0, y0, x1, y1), t in lines if x1 > x0 and y1 > y0]
    return _found(state, subtask, "ocr_rapid", lines, malformed=bad)


# ---- tesseract -------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def tesseract_reason() -> str | None:
    exe = shutil.which("tesseract")
    if exe is None:
        return "the tesseract binary is not installed (Debian: apt-get install tesseract-ocr)"
    try:
        langs = subprocess.run([exe, "--list-langs"], capture_output=True, text=True, timeout=20).stdout.split()
    except (OSError, subprocess.SubprocessError) as err:
        return f"tesseract does not run: {err}"
    return None if "eng" in langs else "tesseract has no English data (apt-get install tesseract-ocr-eng)"


TESSERACT_MIN_CONF = 50.0


def parse_tesseract_tsv(tsv: str) -> list[tuple[tuple[int, int, int, int], str]]:
    """Tesseract's TSV → its words (conf ≥ TESSERACT_MIN_CONF) merged into lines, (box, text)."""
    rows = [r.split("\t") for r in tsv.splitlines()]
    if not rows or rows[0][:1] != ["level"]:
        return []
    col = {name: i for i, name in enumerate(rows[0])}
    words = []
    for r in rows[1:]:
        if len(r) != len(col) or r[col["level"]] != "5" or not r[col["text"]].strip():
            continue
        try:
            x, y, w, h, conf = (float(r[col[k]]) for k in ("left", "top", "width", "height", "conf"))
        except ValueError:
            continue
        if conf >= TESSERACT_MIN_CONF and w > 0 and h > 0:
            words.append(((int(x), int(y), int(x + w), int(y + h)), r[col["text"]].strip()))
    boxes = [b for b, _ in words]
    return [(union_box([boxes[i] for i in g]), " ".join(words[i][1] for i in sorted(g, key=lambda i: boxes[i][0])))
            for g in group_boxes(boxes, gap=1.0)]


def _tesseract(image: np.ndarray, psm: str) -> list[tuple[tuple[int, int, int, int], str]]:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    try:
        run = subprocess.run([shutil.which("tesseract"), "stdin", "stdout", "--psm", psm, "tsv"], input=buf.getvalue(),
                             capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise EditError("ocr_tesseract: tesseract took more than 60 s") from None
    if run.returncode != 0:
        raise EditError(f"ocr_tesseract: tesseract failed ({run.returncode}): "
                        f"{run.stderr.decode(errors='replace')[-300:]}")
    return parse_tesseract_tsv(run.stdout.decode("utf-8", errors="replace"))


def _tesseract_lines(image: np.ndarray) -> list[tuple[tuple[int, int, int, int], str]]:
    """Each MSER text line read on its own (single-line mode), on a crop with a margin: tesseract's page
    layout misses lines next to large shapes that a crop shows it alone."""
    h, w = image.shape[:2]
    out = []
    for x0, y0, x1, y1 in text_lines(image):
        m = max(4, (y1 - y0) // 2)
        X0, Y0, X1, Y1 = max(0, x0 - m), max(0, y0 - m), min(w, x1 + m), min(h, y1 + m)
        crop = np.ascontiguousarray(image[Y0:Y1, X0:X1])
        scale = 2 if y1 - y0 < 24 else 1  # tesseract reads small print better enlarged
        if scale > 1:
            crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
        words = _tesseract(crop, "7")
        if words:
            out.append(((x0, y0, x1, y1), " ".join(t for _, t in words)))
    return out


def ocr_tesseract(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "ocr_tesseract")
    why = tesseract_reason()
    if why:
        raise EditError(f"ocr_tesseract: {why}")
    query = text_query(subtask)
    L = lab(image)

    def usable(found):
        return [(b, t) for b, t in found
                if plausible_reading(L, b, t) and (not query or text_similarity(t, query) >= MATCH_MIN)]

    # sparse-text mode (11) on the whole image first; where it finds nothing usable, each text-like line
    # on its own, then page mode (3): each reads some lines the others miss (next to shapes, on checks)
    lines = _tesseract(image, "11")
    for more in (_tesseract_lines, lambda im: _tesseract(im, "3")):
        if usable(lines):
            break
        lines += more(image)
    return _found(state, subtask, "ocr_tesseract", lines)


# ---- MSER ------------------------------------------------------------------------------------------------

CHAR_CONTRAST = 25.0  # ΔE between a character and the frame around its box


def _inside(b, a) -> bool:
    return a[0] <= b[0] and a[1] <= b[1] and b[2] <= a[2] and b[3] <= a[3] and b != a


def _characters(cands: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """One box per character from MSER's nested regions (of one polarity): a region holding two separate
    smaller ones is several letters merged with the background between them (dropped); otherwise the
    outermost region of a nest is the letter."""
    cands = sorted(set(cands), key=lambda b: -(b[2] - b[0]) * (b[3] - b[1]))
    drop = set()
    for a in cands:
        inner = [b for b in cands if _inside(b, a)]
        if any(b[2] <= c[0] or c[2] <= b[0] for i, b in enumerate(inner) for c in inner[i + 1:]):
            drop.add(a)
    kept = [b for b in cands if b not in drop]
    return [b for b in kept if not any(_inside(b, a) for a in kept)]


def text_lines(image: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Boxes of text-like lines: MSER regions shaped like characters (height 6 px .. ¼ of the image, not a
    solid square blob), contrasting with the frame around them, grouped into lines of ≥ 2 characters of one
    polarity (dark on light or light on dark; a letter's holes have the other one)."""
    h, w = image.shape[:2]
    L = lab(image)
    gray = np.clip(L[..., 0] * 2.55, 0, 255).astype(np.uint8)
    mser = cv2.MSER_create(5, 8, max(64, int(0.01 * h * w)))
    regions, rects = mser.detectRegions(gray)
    by_polarity: dict[bool, list] = {True: [], False: []}
    for pts, (x, y, bw, bh) in zip(regions, rects):
        if not (6 <= bh <= h / 4 and bw <= 2.5 * bh):
            continue
        fill = len(pts) / float(bw * bh)
        if fill < 0.08 or (fill > 0.9 and 0.6 <= bw / bh <= 1.6):
            continue
        X0, Y0, X1, Y1 = max(0, x - 2), max(0, y - 2), min(w, x + bw + 2), min(h, y + bh + 2)
        frame = np.median(np.concatenate([L[Y0, X0:X1], L[Y1 - 1, X0:X1], L[Y0:Y1, X0], L[Y0:Y1, X1 - 1]]), 0)
        inner = L[pts[:, 1], pts[:, 0]].mean(0)
        if float(delta_e_lab(inner, frame)) >= CHAR_CONTRAST:
            by_polarity[bool(inner[0] < frame[0])].append((int(x), int(y), int(x + bw), int(y + bh)))
    lines = []
    for cands in by_polarity.values():
        chars = _characters(cands)
        lines += [union_box([chars[i] for i in g]) for g in group_boxes(chars, gap=0.8) if len(g) >= 2]
    # a line mostly inside a larger one is made of that line's parts (a letter's holes, the gaps between
    # letters seen against a textured background)
    lines = [b for b in set(lines) if not any(_area(a) > _area(b) and _overlap(b, a) >= 0.5 * _area(b) for a in lines)]
    return sorted(lines, key=lambda b: (b[1], b[0]))


def _area(b) -> int:
    return max(0, b[2] - b[0]) * max(0, b[3] - b[1])


def _overlap(a, b) -> int:
    return max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))


def text_mser(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "text_mser")
    return _found(state, subtask, "text_mser", [(b, "") for b in text_lines(image)])


# ---- writing ---------------------------------------------------------------------------------------------

def _new_text(subtask: Subtask, tool: str) -> str:
    text = subtask.params.get("text")
    if not isinstance(text, str) or not text.strip():
        raise EditError(f"{tool}: params['text'] must be the text to write, got {text!r}")
    return text.strip()


def _contrasting(image: np.ndarray, box) -> tuple[int, int, int]:
    """Black on a light patch, white on a dark one (the patch: the box, clipped to the image)."""
    h, w = image.shape[:2]
    x0, y0, x1, y1 = max(0, box[0]), max(0, box[1]), min(w, box[2]), min(h, box[3])
    patch = image[y0:y1, x0:x1] if x1 > x0 and y1 > y0 else image
    return COLORS["black"] if float(lab(patch)[..., 0].mean()) > 55 else COLORS["white"]


def _size_for_height(text: str, height: int) -> int:
    """The font size at which `text`'s ink is `height` px tall."""
    ref = 100
    left, t, r, b = font(ref).getbbox(text)
    size = max(6, round(ref * height / max(b - t, 1)))
    for _ in range(4):  # hinting makes height not quite linear in size
        left, t, r, b = font(size).getbbox(text)
        if b - t == height or size <= 6:
            break
        size += 1 if b - t < height else -1
    return size


def placements(state: EditState, subtask: Subtask, tool: str, measure) -> list[dict]:
    """Where each line of the new text goes: [{"x0", "y0", "size", "color"}] with (x0, y0) the ink's top-left;
    `measure(text, size)` → (width, height) of the ink in the tool's font."""
    image = state.image
    h, w = image.shape[:2]
    text = _new_text(subtask, tool)
    color = subtask.params.get("color")
    color = COLORS[require_color(color, tool)] if color is not None else None
    if subtask.kind == "text_replace":
        if not state.text_boxes:
            raise EditError(f"{tool}: no box of the text being replaced (the find_text stage found none)")
        inks = state.info.get("text_ink") or []
        out = []
        for i, box in enumerate(state.text_boxes):
            x0, y0, x1, y1 = (int(v) for v in box[:4])
            old = box[4] if len(box) > 4 and isinstance(box[4], str) and box[4].strip() else text_query(subtask)
            size = _size_for_height(old or text, y1 - y0)
            ink = inks[i] if i < len(inks) and len(inks[i]) == 3 else None
            out.append({"x0": x0, "y0": y0, "size": size,
                        "color": color or (tuple(ink) if ink else _contrasting(image, (x0, y0, x1, y1)))})
        return out
    position = subtask.params.get("position")
    if position not in POSITIONS:
        raise EditError(f"{tool}: params['position'] must be one of {', '.join(POSITIONS)}, got {position!r}")
    col, row = POSITIONS.index(position) % 3, POSITIONS.index(position) // 3
    margin = round(0.05 * min(w, h))
    size = max(10, round(0.10 * h))
    while size > 10 and measure(text, size)[0] > w / 3 - margin - 8:
        size -= 1
    tw, th = measure(text, size)
    if tw > w - 2 * margin or th > h - 2 * margin:
        raise EditError(f"{tool}: {text!r} does not fit in the {w}×{h} image even at size {size}")
    x0 = (margin, (w - tw) / 2, w - margin - tw)[col]
    y0 = (margin, (h - th) / 2, h - margin - th)[row]
    box = (int(x0), int(y0), int(x0 + tw), int(y0 + th))
    return [{"x0": int(round(x0)), "y0": int(round(y0)), "size": size, "color": color or _contrasting(image, box)}]


def _pil_measure(text: str, size: int) -> tuple[int, int]:
    left, t, r, b = font(size).getbbox(text)
    return r - left, b - t


def write_text(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "write_text")
    text = _new_text(subtask, "write_text")
    im = Image.fromarray(image.copy())
    draw = ImageDraw.Draw(im)
    boxes = []
    for p in placements(state, subtask, "write_text", _pil_measure):
        f = font(p["size"])
        left, t, r, b = f.getbbox(text)
        draw.text((p["x0"] - left, p["y0"] - t), text, font=f, fill=tuple(int(c) for c in p["color"]))
        boxes.append((p["x0"], p["y0"], p["x0"] + r - left, p["y0"] + b - t, text))
    return state.evolve(image=np.asarray(im), text_boxes=boxes,
                        info={**state.info, "write_text": {"font": font_path() or "PIL default",
                                                           "sizes": [b[3] - b[1] for b in boxes]}})


HERSHEY = cv2.FONT_HERSHEY_DUPLEX


def _cv2_metrics(text: str, size: int) -> tuple[float, int]:
    """(fontScale, thickness) for ink `size`×0.73 px tall: capitals in a TrueType font of that size."""
    (_, th), _ = cv2.getTextSize(text, HERSHEY, 1.0, 1)
    scale = 0.73 * size / max(th, 1)
    return scale, max(1, round(scale * 2))


def _cv2_measure(text: str, size: int) -> tuple[int, int]:
    scale, thick = _cv2_metrics(text, size)
    (tw, th), _ = cv2.getTextSize(text, HERSHEY, scale, thick)
    return tw, th


def write_text_cv2(state: EditState, subtask: Subtask) -> EditState:
    image = require_image(state, "write_text_cv2")
    text = _new_text(subtask, "write_text_cv2")
    out = np.ascontiguousarray(image.copy())
    boxes = []
    for p in placements(state, subtask, "write_text_cv2", _cv2_measure):
        scale, thick = _cv2_metrics(text, p["size"])
        (tw, th), _ = cv2.getTextSize(text, HERSHEY, scale, thick)
        cv2.putText(out, text, (p["x0"], p["y0"] + th), HERSHEY, scale, tuple(int(c) for c in p["color"]), thick,
                    cv2.LINE_AA)
        boxes.append((p["x0"], p["y0"], p["x0"] + tw, p["y0"] + th, text))
    return state.evolve(image=out, text_boxes=boxes, info={**state.info, "write_text_cv2": {"font": "Hershey duplex"}})


# ---- registration (the first of a stage is the default of a fixed tool chain) --------------------------------

register_edit_tool(EditTool(
    name="ocr_rapid", stage="find_text", kinds=FIND_KINDS, fn=ocr_rapid, check=check_find_text, cost=0.5, quality=0.9,
    available=rapid_reason, description="RapidOCR (ONNX, bundled models): text lines and their reading"))
register_edit_tool(EditTool(
    name="ocr_tesseract", stage="find_text", kinds=FIND_KINDS, fn=ocr_tesseract, check=check_find_text, cost=0.25,
    quality=0.9, available=tesseract_reason, description="tesseract (sparse text), words merged into lines"))
register_edit_tool(EditTool(
    name="text_mser", stage="find_text", kinds=FIND_KINDS, fn=text_mser, check=check_find_text, cost=0.03,
    quality=0.8, description="MSER character regions grouped into lines; reads nothing, matches by line shape"))
register_edit_tool(EditTool(
    name="write_text", stage="write", kinds=WRITE_KINDS, fn=write_text, check=check_write, cost=0.01, quality=0.9,
    description="PIL TrueType text sized to the old text's box, or at a 3×3-grid position"))
register_edit_tool(EditTool(
    name="write_text_cv2", stage="write", kinds=WRITE_KINDS, fn=write_text_cv2, check=check_write, cost=0.005,
    quality=0.8, description="OpenCV Hershey text with the same placement; cheaper, plainer"))

"""A procedurally generated multi-turn image-edit suite whose success is decided by a program, never a judge.

`generate(n, seed)` makes tasks: a scene (384×288 or 512×384) of 2–5 coloured shapes on a background of one of
several kinds (uniform, gradient, noise, stripes, checker, soft "photo-like" blobs), some with text, and an
instruction of 1–4 subtasks in the grammar of planners/subtasks.py (recolor, remove, replace, text_remove,
text_replace, text_add, background, upscale). Since the scene is drawn here, the ground truth of every subtask
(masks, colours, removed regions, texts) and the expected final image are known: the scene is re-rendered
with the edits applied. Tasks are scene *descriptions*; images are rendered only when a task is used.

Rules that keep the tasks fair:
  * a target is unique by its colour+shape words at every point of the task, and "the star" is written only
    when there is one star; "remove the text" without quotes only when there is one text;
  * objects do not overlap (a removed object never hides another), and texts sit on background;
  * colours contrast with the background (CIELAB ΔE ≥ 35, and no background pixel is named that colour);
  * an added text is not edited again (removing it would undo the task); a text replacement is shorter
    than the text it replaces (≤ 60 % of its width), so a pixel check tells
    the new text from the old one (see below); a scene with a background change has no text (whether text is
    foreground is ambiguous); at most one background change and one upscale (×2) per task.

Conventions a tool can follow (the checks tolerate others):
  * replace: the new shape is drawn in the old object's box (`shape_box`): circle, square, star and
    triangle in the centred square of the box's shorter side; ellipse and rectangle in the box, or in a
    centred box of aspect 1.6 when the old box is squarish;
  * text_replace: the new text in the same font size and colour, left-aligned at the old text's left, same
    line; text_add: in the position's cell of a 3×3 grid, 5 % of the shorter side from the image's edges,
    font size 10 % of the image height, black on a light background, white on a dark one.

Checks (`check(task, image)`), all at the input's resolution (an upscaled image is first scaled back), with
colour distances in CIELAB ΔE76 and "named c" meaning c is the nearest of edit_base.COLORS:
  recolor      ≥ 80 % of the object's pixels (mask eroded 2 px) named the target colour.
  remove       the object's colour is gone (≤ 10 % of its pixels still named it, beyond what the expected
               background has) and the region matches the expected background once both are blurred at
               the texture's scale (median ΔE ≤ 12, 90th percentile ≤ 25): inpainting passes, a smear or a
               wrong fill does not.
  replace      a blob of the new colour (largest connected one near the object) of 0.5–2× the expected area,
               classified as the new shape by its contour (solidity, extent in its minimum-area rectangle,
               aspect), centred within 25 % of the box size; the old colour gone from the rest of the old mask.
  text_*       pixel checks, not OCR: "ink" is what differs (ΔE > 30) from the scene rendered without that
               text. text_remove: ≤ 15 % of the old ink left. text_replace: ink of 0.4–2.5× the expected
               amount whose width is 0.6–1.4× the new text's (the old text, ≥ 1.67× wider, fails: so does the
               new text written over the old) and height 0.6–1.5×. text_add: ink of 0.2–4× the expected
               amount, centred in the position's cell, a line (width 0.35–2.5×, aspect ≥ 0.4× the
               expected). Pixels cannot tell two words of the same size apart; an OCR read would, but
               would make the benchmark depend on an OCR model and on the fonts installed.
  background   ≥ 90 % of the background's pixels (away from the objects) within ΔE 20 of the colour.
  upscale      the image is k× the input's size (±1 px) and matches the bicubic upscale of the expected
               image (mean absolute difference ≤ 12 over the untouched part).
  every one    the rest of the image (outside every subtask's region) unchanged: ≤ 2 % of its pixels differ
               by more than 40 in a channel.
A subtask whose object or text a later subtask edits again can only be seen through that later edit; its
result is the later one's, and says so.

The adapter `Edits` (for `toolpath eval edits`, registered when the fast_slow agent lands) writes each task's input PNG under
$TOOLPATH_HOME/benchmarks/edits/seed<seed>/ and runs the "fast_slow" agent; its answer is JSON
{"image": path, ...}, scored 1 when every subtask passes.
"""

from __future__ import annotations

import functools
import io
import json
import os
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ...spec import TaskSpec
from ...tools.image.edit_base import COLORS, KINDS, POSITIONS, SHAPES, Subtask, Target
from ...tools.image.features import shape_box, shape_outline
from . import Benchmark, Record, Score, pick, task_id

N_TASKS = 200
SIZES = ((384, 288), (512, 384))
BG_KINDS = ("uniform", "gradient", "noise", "stripes", "checker", "blobs")
LIGHT_BG = ((236, 228, 212), (214, 226, 236), (222, 234, 214), (232, 220, 232), (226, 226, 220), (240, 226, 214))
DARK_BG = ((52, 60, 78), (74, 62, 52), (44, 64, 58), (64, 52, 72))
TEXT_DARK, TEXT_LIGHT = COLORS["black"], COLORS["white"]
# Texts: the ones replaced are long and their replacements short (see the module docstring); added ones mid.
WORDS_LONG = ("WELCOME", "BAKERY", "STATION", "HOLIDAY", "GARDEN", "PARKING", "MUSEUM", "LIBRARY", "CONCERT",
              "FESTIVAL", "KITCHEN", "HARBOUR", "PICNIC", "SUMMER", "WINTER", "BISTRO", "MARKET", "THEATRE")
WORDS_SHORT = ("HI", "GO", "SUN", "JOY", "ART", "TEA", "FUN", "OK", "BUS", "ZOO", "MAP", "SKY", "YES", "WAY")
WORDS_ADD = ("HELLO", "SALE", "OPEN", "CAFE", "MENU", "EXIT", "NEW", "SHOP", "TAXI", "HOTEL", "PIZZA", "BOOKS")
CELLS = {p: (i % 3, i // 3) for i, p in enumerate(POSITIONS)}  # position → (column, row) of the 3×3 grid

GAP = 14  # px between any two objects/texts/reserved cells
CONTRAST = 35.0  # ΔE between an object's colour and the background's
TOL = {"recolor_frac": 0.8, "gone_frac": 0.10, "bg_median": 12.0, "bg_p90": 25.0, "replace_area": (0.5, 2.0),
       "replace_center": 0.25, "replace_left": 0.15, "ink_de": 30.0, "text_left": 0.15,
       "replace_ink": (0.4, 2.5), "replace_width": (0.6, 1.4), "replace_height": (0.6, 1.5),
       "add_ink": (0.2, 4.0), "add_width": (0.35, 2.5), "add_aspect": 0.4, "bg_de": 20.0, "bg_frac": 0.9,
       "upscale_mad": 12.0, "rest_diff": 40, "rest_frac": 0.02}


# ---- the scene -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Obj:
    id: int
    shape: str
    color: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive), px
    shade: tuple[float, float] = (0.0, 0.0)  # brightness slope across the object, its direction (radians)


@dataclass(frozen=True)
class Text:
    id: int
    text: str
    x: int  # draw origin (PIL's default anchor)
    y: int
    size: int  # font size, px
    color: tuple[int, int, int]


@dataclass(frozen=True)
class Scene:
    width: int
    height: int
    background: dict  # {"kind", "colors": [rgb, …], "seed", "period", "angle"}
    objects: tuple[Obj, ...] = ()
    texts: tuple[Text, ...] = ()
    scale: float = 1.0  # the size the image should have, relative to width × height (upscale)

    def obj(self, oid: int) -> Obj | None:
        return next((o for o in self.objects if o.id == oid), None)

    def text(self, tid: int) -> Text | None:
        return next((t for t in self.texts if t.id == tid), None)


@dataclass
class EditTask:
    id: str
    seed: int
    index: int
    scene: Scene  # the input
    subtasks: list[Subtask]  # what the generator meant, with the parents the grammar gives
    touches: list[tuple]  # per subtask: ("obj", id), ("text", id), ("bg",) or ("size",)
    instruction: str

    @property
    def steps(self) -> int:
        return len(self.subtasks)

    @property
    def category(self) -> str:
        return f"{self.steps} step" + ("s" if self.steps > 1 else "")


@dataclass(frozen=True)
class SubtaskResult:
    id: str
    kind: str
    ok: bool
    detail: str


# ---- drawing ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def font_path() -> str | None:
    """DejaVu Sans Bold if the system has it (any DejaVu Sans otherwise), else None: PIL's default font."""
    roots = [Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), Path.home() / ".fonts",
             Path("/Library/Fonts"), Path("C:/Windows/Fonts")]
    for name in ("DejaVuSans-Bold.ttf", "DejaVuSans.ttf"):
        for root in roots:
            if root.is_dir():
                hit = next(iter(sorted(root.rglob(name))), None)
                if hit:
                    return str(hit)
    return None


@functools.lru_cache(maxsize=64)
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    path = font_path()
    return ImageFont.truetype(path, size) if path else ImageFont.load_default(size)


def text_box(t: Text) -> tuple[int, int, int, int]:
    """The ink box of a text as drawn (x0, y0, x1, y1)."""
    l, top, r, b = font(t.size).getbbox(t.text)
    return t.x + int(l), t.y + int(top), t.x + int(r), t.y + int(b)


def _lab(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(np.asarray(rgb, np.float32).reshape(-1, 1, 3) / 255.0, cv2.COLOR_RGB2Lab).reshape(
        np.shape(rgb))


def delta_e(a, b) -> np.ndarray:
    return np.linalg.norm(_lab(np.asarray(a, np.float32)) - _lab(np.asarray(b, np.float32)), axis=-1)


NAMES = list(COLORS)
_NAME_LAB = _lab(np.array([COLORS[n] for n in NAMES], np.float32))


def color_names(pixels: np.ndarray) -> np.ndarray:
    """Index into NAMES of the nearest colour (CIELAB) for each RGB pixel of an (…, 3) array."""
    lab = _lab(np.asarray(pixels, np.float32).reshape(-1, 3))
    d = np.linalg.norm(lab[:, None, :] - _NAME_LAB[None], axis=-1)
    return d.argmin(axis=1).reshape(np.shape(pixels)[:-1])


def background(scene: Scene) -> np.ndarray:
    """The background as H×W×3 float32 RGB (a fresh copy); deterministic from its seed."""
    return _background(scene.width, scene.height, json.dumps(scene.background, sort_keys=True)).copy()


@functools.lru_cache(maxsize=16)
def _background(W: int, H: int, spec: str) -> np.ndarray:
    bg = json.loads(spec)
    cols = [np.array(c, np.float32) for c in bg["colors"]]
    kind = bg["kind"]
    if kind == "uniform":
        return np.broadcast_to(cols[0], (H, W, 3)).copy()
    rng = np.random.default_rng(bg["seed"])
    y, x = np.mgrid[0:H, 0:W].astype(np.float32)
    angle = np.deg2rad(bg.get("angle", 0))
    u = x * np.cos(angle) + y * np.sin(angle)
    if kind == "gradient":
        t = (u - u.min()) / max(float(u.max() - u.min()), 1.0)
    elif kind == "stripes":
        t = 0.5 + 0.5 * np.clip(4 * np.sin(2 * np.pi * u / bg["period"]), -1, 1)
    elif kind == "checker":
        p = bg["period"]
        t = 0.5 + 0.5 * np.clip(6 * np.sin(np.pi * x / p) * np.sin(np.pi * y / p), -1, 1)
    elif kind == "blobs":
        coarse = rng.normal(size=(H // 32 + 3, W // 32 + 3)).astype(np.float32)
        f = cv2.GaussianBlur(cv2.resize(coarse, (W, H), interpolation=cv2.INTER_CUBIC), (0, 0), 10)
        t = (f - f.min()) / max(float(f.max() - f.min()), 1e-6)
    else:  # noise
        t = np.zeros((H, W), np.float32)
    img = cols[0] * (1 - t[..., None]) + cols[-1] * t[..., None]
    if kind in ("noise", "blobs"):
        sigma = 7.0 if kind == "noise" else 3.0
        grain = rng.normal(0, sigma, (H, W, 1)).astype(np.float32) + rng.normal(0, sigma / 3, (H, W, 3)).astype(np.float32)
        img = img + cv2.GaussianBlur(grain, (0, 0), 0.7).reshape(H, W, -1)
    return np.clip(img, 0, 255).astype(np.float32)


def texture_scale(scene: Scene) -> float:
    """How far apart two background pixels must be to look alike: the blur for comparing backgrounds."""
    kind = scene.background["kind"]
    if kind in ("stripes", "checker"):
        return 0.6 * scene.background["period"]
    return 3.0 if kind in ("noise", "blobs") else 1.5


# shape_outline and shape_box (toolpath.tools.image.features) are the drawing convention the generator, the
# draw_shape tool and the checker share: one definition, so they cannot drift apart.


def _crop(box, W: int, H: int, pad: int = 2) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = (int(v) for v in box)
    return max(x0 - pad, 0), max(y0 - pad, 0), min(x1 + pad, W), min(y1 + pad, H)


def _alpha_crop(shape: str, box, W: int, H: int, ss: int = 4) -> tuple[tuple[int, int, int, int], np.ndarray]:
    """(crop box, coverage in [0, 1] within it) of a shape, anti-aliased by drawing at ss× and averaging."""
    bx0, by0, bx1, by1 = crop = _crop(box, W, H)
    if bx1 <= bx0 or by1 <= by0:
        return crop, np.zeros((max(by1 - by0, 0), max(bx1 - bx0, 0)), np.float32)
    im = Image.new("L", ((bx1 - bx0) * ss, (by1 - by0) * ss), 0)
    d = ImageDraw.Draw(im)
    how, pts = shape_outline(shape, box)
    pts = [((px - bx0) * ss, (py - by0) * ss) for px, py in pts]
    (d.ellipse if how == "ellipse" else d.polygon)(pts, fill=255)
    small = im.resize((bx1 - bx0, by1 - by0), Image.Resampling.BOX)
    return crop, np.asarray(small, np.float32) / 255.0


def object_mask(o: Obj, W: int, H: int) -> np.ndarray:
    (x0, y0, x1, y1), a = _alpha_crop(o.shape, o.box, W, H)
    m = np.zeros((H, W), bool)
    m[y0:y1, x0:x1] = a > 0.5
    return m


def _text_alpha_crop(t: Text, W: int, H: int) -> tuple[tuple[int, int, int, int], np.ndarray]:
    x0, y0, x1, y1 = crop = _crop(text_box(t), W, H, pad=3)
    im = Image.new("L", (max(x1 - x0, 0), max(y1 - y0, 0)), 0)
    ImageDraw.Draw(im).text((t.x - x0, t.y - y0), t.text, font=font(t.size), fill=255)
    return crop, np.asarray(im, np.float32) / 255.0


def text_mask(t: Text, W: int, H: int) -> np.ndarray:
    (x0, y0, x1, y1), a = _text_alpha_crop(t, W, H)
    m = np.zeros((H, W), bool)
    m[y0:y1, x0:x1] = a > 0.5
    return m


def render(scene: Scene) -> np.ndarray:
    """The scene at its base size (width × height), H×W×3 uint8 RGB (read-only: renders are cached)."""
    key = repr(scene)
    hit = _RENDERS.get(key)
    if hit is None:
        hit = _render(scene)
        hit.flags.writeable = False
        _RENDERS[key] = hit
        while len(_RENDERS) > 48:
            _RENDERS.pop(next(iter(_RENDERS)))
    return hit


_RENDERS: dict[str, np.ndarray] = {}


def _render(scene: Scene) -> np.ndarray:
    W, H = scene.width, scene.height
    img = background(scene)
    for o in scene.objects:
        (cx0, cy0, cx1, cy1), a = _alpha_crop(o.shape, o.box, W, H)
        a = a[..., None]
        x0, y0, x1, y1 = o.box
        slope, angle = o.shade
        r = max(x1 - x0, y1 - y0) / 2
        y, x = np.mgrid[cy0:cy1, cx0:cx1].astype(np.float32)
        ramp = ((x - (x0 + x1) / 2) * np.cos(angle) + (y - (y0 + y1) / 2) * np.sin(angle)) / max(r, 1)
        col = np.array(COLORS[o.color], np.float32) * (1 + slope * np.clip(ramp, -1, 1))[..., None]
        part = img[cy0:cy1, cx0:cx1]
        img[cy0:cy1, cx0:cx1] = part * (1 - a) + np.clip(col, 0, 255) * a
    for t in scene.texts:
        (cx0, cy0, cx1, cy1), a = _text_alpha_crop(t, W, H)
        a = a[..., None]
        img[cy0:cy1, cx0:cx1] = img[cy0:cy1, cx0:cx1] * (1 - a) + np.array(t.color, np.float32) * a
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def final_size(scene: Scene) -> tuple[int, int]:
    """(width, height) the edited image should have."""
    return int(round(scene.width * scene.scale)), int(round(scene.height * scene.scale))


# ---- applying subtasks to a scene ------------------------------------------------------------------------

def add_text_at(scene: Scene, text: str, position: str, tid: int) -> Text:
    """The Text that text_add puts at a position (the convention in the module docstring)."""
    W, H = scene.width, scene.height
    col, row = CELLS[position]
    margin = round(0.05 * min(W, H))
    size = max(10, round(0.10 * H))
    while size > 10:
        l, top, r, b = font(size).getbbox(text)
        if r - l <= W / 3 - margin - 8:
            break
        size -= 1
    l, top, r, b = font(size).getbbox(text)
    w, h = r - l, b - top
    ix = (margin, (W - w) / 2, W - margin - w)[col]
    iy = (margin, (H - h) / 2, H - margin - h)[row]
    return Text(tid, text, int(round(ix - l)), int(round(iy - top)), size, text_color(scene))


def text_color(scene: Scene) -> tuple[int, int, int]:
    """Black text on a light background, white on a dark one."""
    light = np.mean([sum(c) / 3 for c in scene.background["colors"]]) > 128
    return TEXT_DARK if light else TEXT_LIGHT


def apply(scene: Scene, s: Subtask, touch: tuple) -> Scene:
    """The scene after one subtask (what the generator meant it to do)."""
    p = s.params
    if s.kind == "recolor":
        return replace(scene, objects=tuple(replace(o, color=p["color"]) if o.id == touch[1] else o
                                            for o in scene.objects))
    if s.kind == "remove":
        return replace(scene, objects=tuple(o for o in scene.objects if o.id != touch[1]))
    if s.kind == "replace":
        return replace(scene, objects=tuple(
            replace(o, color=p["color"], shape=p["shape"], box=shape_box(p["shape"], o.box)) if o.id == touch[1] else o
            for o in scene.objects))
    if s.kind == "text_remove":
        return replace(scene, texts=tuple(t for t in scene.texts if t.id != touch[1]))
    if s.kind == "text_replace":
        return replace(scene, texts=tuple(replace(t, text=p["text"]) if t.id == touch[1] else t for t in scene.texts))
    if s.kind == "text_add":
        return replace(scene, texts=scene.texts + (add_text_at(scene, p["text"], p["position"], touch[1]),))
    if s.kind == "background":
        return replace(scene, background={"kind": "uniform", "colors": [COLORS[p["color"]]]})
    if s.kind == "upscale":
        return replace(scene, scale=scene.scale * float(p["factor"]))
    raise ValueError(f"unknown subtask kind {s.kind!r}")


def states(task: EditTask) -> list[Scene]:
    """The scene before the first subtask and after each one."""
    out = [task.scene]
    for s, touch in zip(task.subtasks, task.touches):
        out.append(apply(out[-1], s, touch))
    return out


# ---- generation ------------------------------------------------------------------------------------------

def _grow(box, d):
    return (box[0] - d, box[1] - d, box[2] + d, box[3] + d)


def _overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _palette(bg: dict) -> list[tuple[float, float, float]]:
    cols = [tuple(map(float, c)) for c in bg["colors"]]
    if len(cols) > 1:
        cols.append(tuple((a + b) / 2 for a, b in zip(cols[0], cols[-1])))
    return cols


def _contrasts(color: str, palettes: list[list]) -> bool:
    """Whether a colour stands out on every background the task has: ΔE ≥ CONTRAST and no background pixel
    colour is nearer to it than to any other named colour."""
    cols = [c for pal in palettes for c in pal]
    if not cols:
        return True
    de = delta_e(np.array([COLORS[color]] * len(cols), np.float32), np.array(cols, np.float32))
    return bool(de.min() >= CONTRAST) and NAMES.index(color) not in set(color_names(np.array(cols)).tolist())


class _Builder:
    """One task's generation: plans kinds, places what they need, simulates the edits. Raises _Retry when a
    random choice leads nowhere (the caller tries the next attempt, still deterministic)."""

    def __init__(self, rng: random.Random, seed: int, index: int):
        self.rng = rng
        self.W, self.H = rng.choice(SIZES)
        kind = rng.choice(BG_KINDS)
        light = rng.random() < 0.75
        c0 = rng.choice(LIGHT_BG if light else DARK_BG)
        shift = [rng.randint(14, 30) * (-1 if light else 1) for _ in range(3)]
        if kind == "gradient":
            shift = [v * 1.6 for v in shift]
        c1 = tuple(int(np.clip(a + d, 0, 255)) for a, d in zip(c0, shift))
        self.bg = {"kind": kind, "colors": [c0] if kind == "uniform" else [c0, c1], "seed": seed * 100003 + index,
                   "period": rng.randint(14, 30), "angle": rng.choice((0, 45, 90, 135))}
        self.palettes = [_palette(self.bg)]
        self.objects: list[Obj] = []
        self.texts: list[Text] = []
        self.taken: list[tuple] = []  # boxes of everything placed or reserved (kept GAP apart)
        self.used_names: set[tuple[str, str]] = set()  # every (colour, shape) any object has had
        self.used_words: set[str] = set()
        self.next_id = 1
        self.colors_cache: list[str] | None = None

    def scene(self) -> Scene:
        return Scene(self.W, self.H, self.bg, tuple(self.objects), tuple(self.texts))

    def colors_ok(self) -> list[str]:
        if self.colors_cache is None:
            self.colors_cache = [c for c in COLORS if _contrasts(c, self.palettes)]
        return self.colors_cache

    def place(self, w: int, h: int) -> tuple[int, int, int, int]:
        m = 8
        for _ in range(200):
            x0, y0 = self.rng.randint(m, self.W - m - w), self.rng.randint(m, self.H - m - h)
            box = (x0, y0, x0 + w, y0 + h)
            if not any(_overlaps(_grow(box, GAP), t) for t in self.taken):
                self.taken.append(box)
                return box
        raise _Retry("no room")

    def new_object(self) -> Obj:
        for _ in range(50):
            shape, color = self.rng.choice(SHAPES), self.rng.choice(self.colors_ok())
            if (color, shape) not in self.used_names:
                break
        else:
            raise _Retry("no free colour+shape")
        s = int(self.rng.uniform(0.17, 0.27) * self.H)
        w, h = {"ellipse": (int(s * 1.6), s), "rectangle": (int(s * 1.6), s), "triangle": (int(s * 1.1), s)}.get(
            shape, (s, s))
        o = Obj(self.next_id, shape, color, self.place(w, h),
                (self.rng.uniform(-0.06, 0.06), self.rng.uniform(0, 2 * np.pi)))
        self.next_id += 1
        self.objects.append(o)
        self.used_names.add((color, shape))
        return o

    def word(self, words) -> str:
        free = [w for w in words if w not in self.used_words]
        if not free:
            raise _Retry("no free word")
        w = self.rng.choice(free)
        self.used_words.add(w)
        return w

    def new_text(self) -> Text:
        word = self.word(WORDS_LONG)
        size = int(self.rng.uniform(0.075, 0.095) * self.H)
        l, top, r, b = font(size).getbbox(word)
        x0, y0, _, _ = self.place(r - l, b - top)
        t = Text(self.next_id, word, x0 - l, y0 - top, size, text_color(self.scene()))
        self.next_id += 1
        self.texts.append(t)
        return t

    def reserve_cell(self, free_cells: list[str]) -> str:
        self.rng.shuffle(free_cells)
        for pos in free_cells:
            col, row = CELLS[pos]
            cell = (col * self.W // 3, row * self.H // 3, (col + 1) * self.W // 3, (row + 1) * self.H // 3)
            if not any(_overlaps(_grow(cell, 6), t) for t in self.taken):
                self.taken.append(_grow(cell, 6))
                free_cells.remove(pos)
                return pos
        raise _Retry("no free cell")


class _Retry(Exception):
    pass


def _plan_kinds(rng: random.Random, primary: str, steps: int) -> list[str]:
    text_kinds, obj_kinds = ("text_remove", "text_replace", "text_add"), ("recolor", "remove", "replace")
    with_bg = primary == "background" or (primary not in text_kinds and steps > 1 and rng.random() < 0.25)
    kinds = [primary] + (["background"] if with_bg and primary != "background" else [])
    pool = list(obj_kinds) * 2 + ([] if with_bg else list(text_kinds)) + ["upscale"]
    while len(kinds) < steps:
        k = rng.choice(pool)
        if (k == "upscale" and "upscale" in kinds) or (len(kinds) == 1 and k == kinds[0]):
            continue  # one upscale at most; the first two kinds differ, so every multi-step task mixes kinds
        kinds.append(k)
    kinds = kinds[:steps]
    rng.shuffle(kinds)
    return kinds


def _build(rng: random.Random, seed: int, index: int, primary: str, steps: int):
    b = _Builder(rng, seed, index)
    kinds = _plan_kinds(rng, primary, steps)
    free_cells = list(POSITIONS)
    cells = {i: b.reserve_cell(free_cells) for i, k in enumerate(kinds) if k == "text_add"}
    scene_now_objects: dict[int, Obj] = {}  # the objects' current state, as the edits are simulated
    alive_texts: dict[int, str] = {}
    plan: list[tuple[Subtask, tuple]] = []
    for i, kind in enumerate(kinds):
        sid = f"s{i + 1}"
        if kind in ("recolor", "remove", "replace"):
            reuse = list(scene_now_objects.values())  # edit an object again sometimes: chains of parents
            if reuse and rng.random() < 0.35:
                o = rng.choice(reuse)
            else:
                o = b.new_object()
                scene_now_objects[o.id] = o
            target = Target(f"{o.color} {o.shape}", o.color, o.shape)
            if kind == "remove":
                plan.append((Subtask(sid, kind, target), ("obj", o.id)))
                del scene_now_objects[o.id]
                continue
            for _ in range(60):
                color = rng.choice(b.colors_ok())
                shape = o.shape if kind == "recolor" else rng.choice([s for s in SHAPES if s != o.shape])
                far = delta_e(np.array(COLORS[color], np.float32), np.array(COLORS[o.color], np.float32)) >= 25
                if color != o.color and far and (color, shape) not in b.used_names:
                    break
            else:
                raise _Retry("no new colour")
            b.used_names.add((color, shape))
            params = {"color": color} if kind == "recolor" else {"color": color, "shape": shape}
            plan.append((Subtask(sid, kind, target, params), ("obj", o.id)))
            scene_now_objects[o.id] = replace(o, color=color, shape=shape)
        elif kind in ("text_remove", "text_replace"):
            # Only the scene's own texts are edited again: removing a text the task added undoes it (a
            # no-op image would pass), and a replacement must be shorter than what it replaces.
            scene_texts = {t.id for t in b.texts}
            long_alive = [tid for tid, w in alive_texts.items() if w in WORDS_LONG]
            pool = long_alive if kind == "text_replace" else [tid for tid in alive_texts if tid in scene_texts]
            if pool and rng.random() < 0.35:
                tid = rng.choice(pool)
            else:
                t = b.new_text()
                tid = t.id
                alive_texts[tid] = t.text
            old = alive_texts[tid]
            if kind == "text_remove":
                plan.append((Subtask(sid, kind, None, {"text": old}), ("text", tid)))
                del alive_texts[tid]
                continue
            t = next(t for t in b.texts if t.id == tid)
            for _ in range(20):
                new = b.word(WORDS_SHORT)
                if font(t.size).getlength(new) <= 0.6 * font(t.size).getlength(old):
                    break
            else:
                raise _Retry("no short replacement")
            plan.append((Subtask(sid, kind, None, {"old": old, "text": new}), ("text", tid)))
            alive_texts[tid] = new
        elif kind == "text_add":
            word = b.word(WORDS_ADD)
            tid = b.next_id
            b.next_id += 1
            plan.append((Subtask(sid, kind, None, {"text": word, "position": cells[i]}), ("text", tid)))
            alive_texts[tid] = word
        elif kind == "background":
            # The new colour must stand out from every colour an object has had, and differ from the old
            # background, so that leaving the background as it was fails.
            used = {c for c, _ in b.used_names}
            old = np.array(b.palettes[0], np.float32)
            options = [c for c in COLORS if all(_contrasts(u, [[COLORS[c]]]) for u in used)
                       and delta_e(np.broadcast_to(np.array(COLORS[c], np.float32), old.shape), old).min() >= 25]
            if not options:
                raise _Retry("no background colour")
            color = rng.choice(options)
            plan.append((Subtask(sid, kind, None, {"color": color}), ("bg",)))
            b.palettes.append([tuple(map(float, COLORS[color]))])
            b.colors_cache = None
        else:
            plan.append((Subtask(sid, "upscale", None, {"factor": 2}), ("size",)))
    want = rng.randint(max(2, len(b.objects)), 5)
    while len(b.objects) < want:
        b.new_object()
    if len(b.objects) < 2:
        raise _Retry("too few objects")
    if "background" not in kinds and rng.random() < 0.3 and len(b.texts) < 2:
        b.new_text()  # a text nothing asks about: the tools must leave it alone
    return b, plan


def _phrase(rng: random.Random, s: Subtask, ref: str, text_ref: str | None) -> str:
    """The clause for one subtask, in one of the grammar's forms."""
    p = s.params
    c = p.get("color", "")
    if c == "gray" and rng.random() < 0.3:
        c = "grey"
    if s.kind == "recolor":
        return rng.choice([f"make the {ref} {c}", f"turn the {ref} {c}", f"paint the {ref} {c}",
                           f"recolor the {ref} {c}", f"colour the {ref} {c}", f"change the color of the {ref} to {c}",
                           f"change the colour of the {ref} to {c}"])
    if s.kind == "remove":
        return f"{rng.choice(['remove', 'erase', 'delete'])} the {ref}"
    if s.kind == "replace":
        art = "an" if c[0] in "aeiou" else "a"
        return f"replace the {ref} with {art} {c} {p['shape']}"
    q = rng.choice(["'", '"'])
    if s.kind == "text_remove":
        what = f"the text {q}{p['text']}{q}" if text_ref else "the text"
        return f"{rng.choice(['remove', 'erase', 'delete'])} {what}"
    if s.kind == "text_replace":
        return rng.choice([f"replace the text {q}{p['old']}{q} with {q}{p['text']}{q}",
                           f"change the text {q}{p['old']}{q} to {q}{p['text']}{q}"])
    if s.kind == "text_add":
        return rng.choice([f"add the text {q}{p['text']}{q} at the {p['position']}",
                           f"write {q}{p['text']}{q} at the {p['position']}"])
    if s.kind == "background":
        if p["color"] == "white" and rng.random() < 0.6:
            return "remove the background"
        return rng.choice([f"make the background {c}", f"change the background to {c}"])
    return rng.choice(["upscale the image 2x", "upscale the image by 2", "upscale the image ×2",
                       "upscale the image by 2x"])


def _write(rng: random.Random, b: _Builder, plan: list[tuple[Subtask, tuple]]) -> tuple[list[Subtask], str]:
    """Targets as written (shape alone when unique then; no quotes when one text) and the instruction."""
    from ...planners.subtasks import infer_parents

    task = EditTask("", 0, 0, b.scene(), [s for s, _ in plan], [t for _, t in plan], "")
    scenes = states(task)
    subtasks, clauses = [], []
    for i, (s, touch) in enumerate(plan):
        before = scenes[i]
        if s.kind in ("recolor", "remove", "replace"):
            o = before.obj(touch[1])
            same_shape = [x for x in before.objects if x.shape == o.shape]
            if len(same_shape) == 1 and rng.random() < 0.3:
                s = replace(s, target=Target(o.shape, None, o.shape))
            else:
                s = replace(s, target=Target(f"{o.color} {o.shape}", o.color, o.shape))
        text_ref = s.params.get("text")
        if s.kind == "text_remove" and len(before.texts) == 1 and rng.random() < 0.5:
            s, text_ref = replace(s, params={}), None
        subtasks.append(s)
        clauses.append(_phrase(rng, s, s.target.name if s.target else "", text_ref))
    text = clauses[0]
    for c in clauses[1:]:
        sep = rng.choice([", ", ", then ", " and ", " then ", "; ", ". "])
        text += sep + (c[0].upper() + c[1:] if sep == ". " else c)
    text = text[0].upper() + text[1:] + ("." if rng.random() < 0.5 else "")
    return infer_parents(subtasks), text


def make_task(seed: int, index: int) -> EditTask:
    """Task `index` of the suite of `seed`; each task is generated on its own, so any one is cheap."""
    steps = index % 4 + 1
    primary = list(KINDS)[(index // 4) % len(KINDS)]
    for attempt in range(100):
        rng = random.Random(f"edits:{seed}:{index}:{attempt}")
        try:
            b, plan = _build(rng, seed, index, primary, steps)
        except _Retry:
            continue
        subtasks, instruction = _write(rng, b, plan)
        return EditTask(f"edits-{seed}-{index:03d}", seed, index, b.scene(), subtasks, [t for _, t in plan],
                        instruction)
    raise RuntimeError(f"edit task {index} of seed {seed}: no valid scene in 100 attempts")


def generate(n: int = N_TASKS, seed: int = 0) -> list[EditTask]:
    """`n` tasks, deterministic by seed: the number of steps cycles 1–4 and each kind leads in turn."""
    return [make_task(seed, i) for i in range(n)]


# ---- checking --------------------------------------------------------------------------------------------

def _disk(r: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))


def _dilate(m: np.ndarray, r: int) -> np.ndarray:
    return cv2.dilate(m.astype(np.uint8), _disk(r)) > 0 if r > 0 else m.copy()


def _erode(m: np.ndarray, r: int) -> np.ndarray:
    e = cv2.erode(m.astype(np.uint8), _disk(r)) > 0
    return e if e.sum() >= 30 else m


def _rect(box, W, H, grow: float = 0) -> np.ndarray:
    m = np.zeros((H, W), bool)
    x0, y0, x1, y1 = (int(round(v)) for v in (box[0] - grow, box[1] - grow, box[2] + grow, box[3] + grow))
    m[max(y0, 0):max(min(y1, H), 0), max(x0, 0):max(min(x1, W), 0)] = True
    return m


def _cell(position: str, W: int, H: int) -> tuple[int, int, int, int]:
    col, row = CELLS[position]
    return col * W // 3, row * H // 3, (col + 1) * W // 3, (row + 1) * H // 3


def classify_shape(mask: np.ndarray) -> str | None:
    """circle, ellipse, square, rectangle, triangle or star from a blob's contour, or None when there is none.
    Solidity (area / convex hull) picks out the star, extent in the minimum-area rectangle the triangle (½),
    the round shapes (π/4) and the boxes (1), the aspect of that rectangle the elongated ones."""
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    if not contours:
        return None
    c = max(contours, key=cv2.contourArea)
    area = cv2.contourArea(c)
    if area < 20:
        return None
    solidity = area / max(cv2.contourArea(cv2.convexHull(c)), 1e-6)
    (_, _), (rw, rh), _ = cv2.minAreaRect(c)
    extent = area / max(rw * rh, 1e-6)
    aspect = max(rw, rh) / max(min(rw, rh), 1e-6)
    if solidity < 0.8:
        return "star"
    if extent < 0.66:
        return "triangle"
    if extent < 0.89:
        return "circle" if aspect < 1.25 else "ellipse"
    return "square" if aspect < 1.25 else "rectangle"


def _robust_box(m: np.ndarray) -> tuple[float, float, float, float] | None:
    ys, xs = np.nonzero(m)
    if len(xs) < 10:
        return None
    return (float(np.percentile(xs, 1)), float(np.percentile(ys, 1)), float(np.percentile(xs, 99)) + 1,
            float(np.percentile(ys, 99)) + 1)


def _largest_component(m: np.ndarray) -> np.ndarray:
    n, labels, stats, _ = cv2.connectedComponentsWithStats(m.astype(np.uint8), connectivity=8)
    if n <= 1:
        return np.zeros_like(m)
    k = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    return labels == k


class _Checker:
    """Everything one check needs: the renders, the states, each subtask's region."""

    def __init__(self, task: EditTask, got: np.ndarray):
        self.task = task
        self.scenes = states(task)
        self.final = self.scenes[-1]
        self.W, self.H = task.scene.width, task.scene.height
        self.input = render(task.scene)
        self.expected = render(self.final)
        self.got_full = got
        self.got = got if got.shape[:2] == (self.H, self.W) else cv2.resize(got, (self.W, self.H),
                                                                           interpolation=cv2.INTER_AREA)
        self.regions = [self.region(i) for i in range(len(task.subtasks))]

    # -- regions --
    def region(self, i: int) -> np.ndarray:
        """The pixels subtask i may change (generously: what tools spill over is theirs too)."""
        s, touch, before, after = self.task.subtasks[i], self.task.touches[i], self.scenes[i], self.scenes[i + 1]
        W, H = self.W, self.H
        if s.kind in ("recolor", "remove", "replace"):
            o0, o1 = before.obj(touch[1]), after.obj(touch[1])
            m = object_mask(o0, W, H) | _rect(o0.box, W, H)
            if o1 is not None:
                m |= object_mask(o1, W, H)
            return _dilate(m, 4 if s.kind == "recolor" else 8)
        if s.kind in ("text_remove", "text_replace"):
            t0 = before.text(touch[1])
            box = list(text_box(t0))
            t1 = after.text(touch[1])
            if t1 is not None:
                b1 = text_box(t1)
                box = [min(box[0], b1[0]), min(box[1], b1[1]), max(box[2], b1[2]), max(box[3], b1[3])]
            return _rect(box, W, H, grow=max(6, 0.35 * t0.size))
        if s.kind == "text_add":
            return _rect(_cell(s.params["position"], W, H), W, H, grow=6)
        if s.kind == "background":
            fg = np.zeros((H, W), bool)
            for o in self.final.objects:
                fg |= object_mask(o, W, H)
            return ~_erode(fg, 3)
        return np.zeros((H, W), bool)

    # -- the checks, each (ok, detail) --
    def rest(self) -> tuple[bool, str]:
        rest = ~np.any(self.regions, axis=0) if self.regions else np.ones((self.H, self.W), bool)
        if rest.sum() == 0:
            return True, ""
        diff = np.abs(self.got.astype(np.int16) - self.expected.astype(np.int16)).max(axis=-1)
        frac = float((diff[rest] > TOL["rest_diff"]).mean())
        return frac <= TOL["rest_frac"], f"{frac:.1%} of the untouched image changed (at most {TOL['rest_frac']:.0%})"

    def _names_frac(self, img: np.ndarray, m: np.ndarray, color: str) -> float:
        if m.sum() == 0:
            return 0.0
        return float((color_names(img[m]) == NAMES.index(color)).mean())

    def _gone(self, m: np.ndarray, color: str) -> tuple[bool, float]:
        left = self._names_frac(self.got, m, color) - self._names_frac(self.expected, m, color)
        return left <= TOL["gone_frac"], left

    def _like_background(self, m: np.ndarray) -> tuple[bool, str]:
        sigma = texture_scale(self.final)
        g = cv2.GaussianBlur(self.got.astype(np.float32), (0, 0), sigma)
        e = cv2.GaussianBlur(self.expected.astype(np.float32), (0, 0), sigma)
        de = delta_e(g[m], e[m])
        med, p90 = float(np.median(de)), float(np.percentile(de, 90))
        ok = med <= TOL["bg_median"] and p90 <= TOL["bg_p90"]
        return ok, f"region vs expected background ΔE median {med:.1f}, p90 {p90:.1f}"

    def recolor(self, i: int) -> tuple[bool, str]:
        s, o = self.task.subtasks[i], self.final.obj(self.task.touches[i][1])
        m = _erode(object_mask(o, self.W, self.H), 2)
        frac = self._names_frac(self.got, m, s.params["color"])
        return frac >= TOL["recolor_frac"], f"{frac:.0%} of the object is {s.params['color']} (need 80%)"

    def remove(self, i: int) -> tuple[bool, str]:
        o = self.scenes[i].obj(self.task.touches[i][1])
        m = _erode(object_mask(o, self.W, self.H), 1)
        gone, left = self._gone(m, o.color)
        like, detail = self._like_background(m)
        return gone and like, f"{max(left, 0):.0%} still {o.color}; {detail}"

    def replace(self, i: int) -> tuple[bool, str]:
        s, touch = self.task.subtasks[i], self.task.touches[i]
        old, new = self.scenes[i].obj(touch[1]), self.final.obj(touch[1])
        W, H = self.W, self.H
        new_mask = object_mask(new, W, H)
        near = _dilate(_rect(old.box, W, H) | new_mask, 6)
        named = np.zeros((H, W), bool)
        named[near] = color_names(self.got[near]) == NAMES.index(s.params["color"])
        blob = _largest_component(named)
        area = blob.sum() / max(new_mask.sum(), 1)
        shape = classify_shape(blob)
        problems = []
        lo, hi = TOL["replace_area"]
        if not lo <= area <= hi:
            problems.append(f"the {s.params['color']} blob is {area:.2f}× the expected area")
        if shape != s.params["shape"]:
            problems.append(f"its shape reads as {shape}, not {s.params['shape']}")
        if blob.any():
            ys, xs = np.nonzero(blob)
            ey, ex = np.nonzero(new_mask)
            off = np.hypot(xs.mean() - ex.mean(), ys.mean() - ey.mean())
            size = max(old.box[2] - old.box[0], old.box[3] - old.box[1])
            if off > TOL["replace_center"] * size:
                problems.append(f"it is {off:.0f} px off the object's centre")
        leftover = _erode(object_mask(old, W, H), 1) & ~_dilate(blob | new_mask, 4)
        if leftover.sum() >= 30 and old.color != s.params["color"]:
            left = self._names_frac(self.got, leftover, old.color) - self._names_frac(self.expected, leftover, old.color)
            if left > TOL["replace_left"]:
                problems.append(f"{left:.0%} of the old object's remaining area is still {old.color}")
        return not problems, "; ".join(problems) or f"a {s.params['color']} {shape} ({area:.2f}× the expected area)"

    def _ink(self, without: Scene, region: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ink in the image, ink expected) in a region: pixels unlike the scene rendered without a text."""
        clean = render(without)
        ink_got = np.zeros_like(region)
        ink_exp = np.zeros_like(region)
        ink_got[region] = delta_e(self.got[region], clean[region]) > TOL["ink_de"]
        ink_exp[region] = delta_e(self.expected[region], clean[region]) > TOL["ink_de"]
        return ink_got, ink_exp

    def text_remove(self, i: int) -> tuple[bool, str]:
        m = _dilate(text_mask(self.scenes[i].text(self.task.touches[i][1]), self.W, self.H), 1)
        left = float((delta_e(self.got[m], self.expected[m]) > TOL["ink_de"]).mean())
        return left <= TOL["text_left"], f"{left:.0%} of the text's ink is left (at most 15%)"

    def text_replace(self, i: int) -> tuple[bool, str]:
        tid = self.task.touches[i][1]
        new = self.final.text(tid)
        without = replace(self.final, texts=tuple(t for t in self.final.texts if t.id != tid))
        ink_got, ink_exp = self._ink(without, self.regions[i])
        return self._text_line(ink_got, ink_exp, TOL["replace_ink"], TOL["replace_width"], TOL["replace_height"],
                               f"'{new.text}'")

    def _text_line(self, ink_got, ink_exp, ink_range, width_range, height_range, what) -> tuple[bool, str]:
        bg, be = _robust_box(ink_got), _robust_box(ink_exp)
        if bg is None:
            return False, f"no text found where {what} should be"
        amount = ink_got.sum() / max(ink_exp.sum(), 1)
        w, h = (bg[2] - bg[0]) / (be[2] - be[0]), (bg[3] - bg[1]) / (be[3] - be[1])
        problems = []
        if not ink_range[0] <= amount <= ink_range[1]:
            problems.append(f"ink {amount:.2f}× the expected amount")
        if not width_range[0] <= w <= width_range[1]:
            problems.append(f"text {w:.2f}× as wide as {what}")
        if height_range and not height_range[0] <= h <= height_range[1]:
            problems.append(f"text {h:.2f}× as tall as {what}")
        return not problems, "; ".join(problems) or f"a text line like {what} (width {w:.2f}×, ink {amount:.2f}×)"

    def text_add(self, i: int) -> tuple[bool, str]:
        s, tid = self.task.subtasks[i], self.task.touches[i][1]
        without = replace(self.final, texts=tuple(t for t in self.final.texts if t.id != tid))
        ink_got, ink_exp = self._ink(without, self.regions[i])
        ok, detail = self._text_line(ink_got, ink_exp, TOL["add_ink"], TOL["add_width"], None, f"'{s.params['text']}'")
        bg, be = _robust_box(ink_got), _robust_box(ink_exp)
        if bg is None:
            return ok, detail
        problems = [] if ok else [detail]
        x0, y0, x1, y1 = _cell(s.params["position"], self.W, self.H)
        cx, cy = (bg[0] + bg[2]) / 2, (bg[1] + bg[3]) / 2
        if not (x0 <= cx <= x1 and y0 <= cy <= y1):
            problems.append(f"the text is centred at ({cx:.0f}, {cy:.0f}), outside the {s.params['position']} cell")
        aspect_g = (bg[2] - bg[0]) / max(bg[3] - bg[1], 1)
        aspect_e = (be[2] - be[0]) / max(be[3] - be[1], 1)
        if aspect_g < TOL["add_aspect"] * aspect_e:
            problems.append("the ink is not a line of text")
        return not problems, "; ".join(problems) or detail

    def background_change(self, i: int) -> tuple[bool, str]:
        color = self.task.subtasks[i].params["color"]
        fg = np.zeros((self.H, self.W), bool)
        for o in self.final.objects:
            fg |= object_mask(o, self.W, self.H)
        bgm = ~_dilate(fg, 4)
        de = delta_e(self.got[bgm], np.broadcast_to(np.array(COLORS[color], np.float32), (int(bgm.sum()), 3)))
        frac = float((de <= TOL["bg_de"]).mean())
        return frac >= TOL["bg_frac"], f"{frac:.0%} of the background is {color} (need 90%)"

    def upscale(self, i: int) -> tuple[bool, str]:
        gw, gh = self.got_full.shape[1], self.got_full.shape[0]
        big = cv2.resize(self.expected, (gw, gh), interpolation=cv2.INTER_CUBIC)
        others = np.any([r for j, r in enumerate(self.regions) if j != i], axis=0) if len(self.regions) > 1 \
            else np.zeros((self.H, self.W), bool)
        keep = cv2.resize((~others).astype(np.uint8), (gw, gh), interpolation=cv2.INTER_NEAREST) > 0
        if keep.sum() == 0:
            return True, f"{gw}x{gh}"
        mad = float(np.abs(self.got_full.astype(np.float32) - big.astype(np.float32))[keep].mean())
        return mad <= TOL["upscale_mad"], f"{gw}x{gh}; mean difference from the bicubic upscale {mad:.1f}"

    def run(self) -> list[SubtaskResult]:
        rest_ok, rest_detail = self.rest()
        kinds = {"background": self.background_change}
        own: dict[int, tuple[bool, str]] = {}
        owner = {}  # the last subtask touching each object/text: the one the final image shows
        for i, touch in enumerate(self.task.touches):
            owner[touch if touch[0] in ("obj", "text") else ("self", i)] = i
        for i in set(owner.values()):
            s = self.task.subtasks[i]
            own[i] = (kinds.get(s.kind) or getattr(self, s.kind))(i)
        out = []
        for i, (s, touch) in enumerate(zip(self.task.subtasks, self.task.touches)):
            j = owner[touch if touch[0] in ("obj", "text") else ("self", i)]
            ok, detail = own[j]
            if j != i:
                detail = f"seen through {self.task.subtasks[j].id} (a later edit of the same {touch[0]}): {detail}"
            if not rest_ok:
                ok, detail = False, f"{detail}; {rest_detail}"
            out.append(SubtaskResult(s.id, s.kind, bool(ok), detail))
        return out


def _as_rgb(image: Any) -> np.ndarray:
    if isinstance(image, Image.Image):
        image = np.asarray(image.convert("RGB"))
    a = np.asarray(image)
    if a.ndim == 2:
        a = np.stack([a] * 3, axis=-1)
    if a.ndim != 3 or a.shape[2] not in (3, 4):
        raise ValueError(f"expected an H×W×3 RGB image, got an array of shape {a.shape}")
    if a.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image, got dtype {a.dtype}")
    return np.ascontiguousarray(a[..., :3])


def check(task: EditTask, image: Any) -> list[SubtaskResult]:
    """Per subtask, whether the edited image shows it done (see the module docstring for each test). An
    image of the wrong size fails every subtask; one that is not an RGB image is a ValueError."""
    got = _as_rgb(image)
    w, h = final_size(states(task)[-1])
    gh, gw = got.shape[:2]
    if abs(gw - w) > 1 or abs(gh - h) > 1:
        why = f"the image is {gw}x{gh}, expected {w}x{h}"
        return [SubtaskResult(s.id, s.kind, False, why) for s in task.subtasks]
    return _Checker(task, got).run()


def expected_image(task: EditTask) -> np.ndarray:
    """The ideal result, at its final size (an upscale is bicubic)."""
    final = states(task)[-1]
    img = render(final)
    size = final_size(final)
    return img if size == (final.width, final.height) else cv2.resize(img, size, interpolation=cv2.INTER_CUBIC)


def input_image(task: EditTask) -> np.ndarray:
    return render(task.scene)


def subtask_samples(n_tasks: int, seed: int) -> list[tuple[np.ndarray, Subtask]]:
    """One (image, subtask) per subtask of `n_tasks` generated tasks, each image the scene just before that
    subtask: what `toolpath tools calibrate` measures the tools on (use a seed other than the benchmark's,
    so priors are not fitted to the tasks they are judged on)."""
    out = []
    for task in generate(n_tasks, seed):
        for scene, s in zip(states(task), task.subtasks):
            out.append((render(scene), s))
    return out


# ---- the benchmark adapter -------------------------------------------------------------------------------

def _home() -> Path:
    return Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath")


@functools.lru_cache(maxsize=256)
def _task(seed: int, index: int) -> EditTask:
    return make_task(seed, index)


def _png_bytes(img: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return buf.getvalue()


def _answer_image(answer: Any) -> tuple[np.ndarray | None, str]:
    """The image an answer points at, or None and why not. The answer is untrusted."""
    data = answer
    if isinstance(answer, str):
        text = answer.strip()
        try:
            data = json.loads(text)
        except ValueError:
            m = re.search(r"\{.*\}", text, re.DOTALL)
            try:
                data = json.loads(m.group(0)) if m else None
            except ValueError:
                data = None
    if not isinstance(data, dict):
        return None, f"the answer is not a JSON object with an image path: {str(answer)[:120]!r}"
    path = data.get("image")
    if not isinstance(path, str) or not path.strip():
        return None, "the answer has no \"image\" path"
    try:
        with Image.open(Path(path).expanduser()) as im:
            return np.asarray(im.convert("RGB")), ""
    except (OSError, ValueError, Image.DecompressionBombError) as err:
        return None, f"cannot read the image {path!r}: {err}"


class Edits(Benchmark):
    name = "edits"
    description = "procedurally generated multi-step image edits, checked by a program (FaSTA*'s suite)"
    categories = ("1 step", "2 steps", "3 steps", "4 steps")

    def __init__(self, n: int = N_TASKS, agent: str = "fast_slow"):
        self.n, self.agent = n, agent

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        tasks = [_task(seed, i) for i in range(self.n)]
        return pick([Record(id=t.id, category=t.category, data={
            "seed": seed, "index": t.index, "instruction": t.instruction, "kinds": [s.kind for s in t.subtasks],
            "size": [t.scene.width, t.scene.height]}) for t in tasks], limit, seed)

    def task(self, record: Record) -> EditTask:
        return _task(int(record.data["seed"]), int(record.data["index"]))

    def image_path(self, record: Record) -> Path:
        """The task's input PNG, written once and rewritten only when the render differs (a new version)."""
        t = self.task(record)
        path = _home() / "benchmarks" / "edits" / f"seed{t.seed}" / f"{t.id}.png"
        data = _png_bytes(input_image(t))
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return path

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        t = self.task(record)
        spec = {"id": task_id(record.id), "instruction": t.instruction,
                "inputs": {"images": [str(self.image_path(record))]}, "agent": {"name": self.agent},
                "evaluator": None,
                "metadata": {"benchmark": self.name, "category": record.category, "record_id": record.id,
                             "seed": t.seed, "index": t.index, "kinds": [s.kind for s in t.subtasks]}}
        if model:
            spec["model"] = model
        return TaskSpec.model_validate(spec)

    def subtask_success(self, record: Record, answer: Any) -> list[SubtaskResult]:
        """Per-subtask results for an answer; an unusable answer fails every subtask, saying why."""
        t = self.task(record)
        img, why = _answer_image(answer)
        if img is not None:
            try:
                return check(t, img)
            except ValueError as err:
                why = str(err)
        return [SubtaskResult(s.id, s.kind, False, why) for s in t.subtasks]

    def score(self, record: Record, answer: Any) -> Score:
        """1 when every subtask is done, with metrics beyond it: the share of subtasks done (checked here), and
        the cost and quality the agent reports in its answer (seconds of tool calls, tool calls, product of step
        qualities), when it reports them. A malformed report is left out, not guessed."""
        results = self.subtask_success(record, answer)
        value = 1.0 if results and all(r.ok for r in results) else 0.0
        failed = "; ".join(f"{r.id}: {r.detail}" for r in results if not r.ok)
        out = {"subtask_success": sum(r.ok for r in results) / len(results) if results else 0.0}
        try:
            data = json.loads(answer) if isinstance(answer, str) else answer
            subs = data.get("subtasks") or []
            out["cost_s"] = float(data["cost_s"])
            out["tool_calls"] = float(data["tool_calls"])
            qualities = [float(s["quality"]) for s in subs if s.get("ok")]
            if qualities:
                out["quality"] = sum(qualities) / len(qualities)
        except (TypeError, ValueError, KeyError, AttributeError):
            pass
        return Score(value, out, f"not done: {failed}" if failed else "every subtask done")

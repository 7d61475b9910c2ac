"""The edit suite's scenes: what a generated image holds (objects, texts, a background), drawing it, and the
scene each subtask leaves (the ground truth the checks compare against). See the package docstring."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace

import cv2
import numpy as np
from PIL import Image, ImageDraw

from ....tools.image.edit_base import COLORS, POSITIONS, Subtask
from ....tools.image.features import shape_box, shape_outline
from ....tools.image.fonts import font

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
class EditScene:
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
    scene: EditScene  # the input
    subtasks: list[Subtask]  # what the generator meant, with the parents the grammar gives
    touches: list[tuple]  # per subtask: ("obj", id), ("text", id), ("bg",) or ("size",)
    instruction: str

    @property
    def steps(self) -> int:
        return len(self.subtasks)

    @property
    def category(self) -> str:
        return f"{self.steps} step" + ("s" if self.steps > 1 else "")


# ---- drawing ---------------------------------------------------------------------------------------------

def text_box(t: Text) -> tuple[int, int, int, int]:
    """The ink box of a text as drawn (x0, y0, x1, y1)."""
    left, top, r, b = font(t.size).getbbox(t.text)
    return t.x + int(left), t.y + int(top), t.x + int(r), t.y + int(b)


def _lab(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(np.asarray(rgb, np.float32).reshape(-1, 1, 3) / 255.0, cv2.COLOR_RGB2Lab).reshape(
        np.shape(rgb))


def delta_e_rgb(a, b) -> np.ndarray:
    """ΔE76 between (…, 3) RGB arrays (0–255), through CIELAB (tools/image/features.delta_e_lab takes CIELAB)."""
    return np.linalg.norm(_lab(np.asarray(a, np.float32)) - _lab(np.asarray(b, np.float32)), axis=-1)


NAMES = list(COLORS)
_NAME_LAB = _lab(np.array([COLORS[n] for n in NAMES], np.float32))


def color_names(pixels: np.ndarray) -> np.ndarray:
    """Index into NAMES of the nearest colour (CIELAB) for each RGB pixel of an (…, 3) array."""
    lab = _lab(np.asarray(pixels, np.float32).reshape(-1, 3))
    d = np.linalg.norm(lab[:, None, :] - _NAME_LAB[None], axis=-1)
    return d.argmin(axis=1).reshape(np.shape(pixels)[:-1])


def background(scene: EditScene) -> np.ndarray:
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
        grain = (rng.normal(0, sigma, (H, W, 1)).astype(np.float32)
                 + rng.normal(0, sigma / 3, (H, W, 3)).astype(np.float32))
        img = img + cv2.GaussianBlur(grain, (0, 0), 0.7).reshape(H, W, -1)
    return np.clip(img, 0, 255).astype(np.float32)


def texture_scale(scene: EditScene) -> float:
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


def render(scene: EditScene) -> np.ndarray:
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


def _render(scene: EditScene) -> np.ndarray:
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


def final_size(scene: EditScene) -> tuple[int, int]:
    """(width, height) the edited image should have."""
    return int(round(scene.width * scene.scale)), int(round(scene.height * scene.scale))


# ---- applying subtasks to a scene ------------------------------------------------------------------------

def add_text_at(scene: EditScene, text: str, position: str, tid: int) -> Text:
    """The Text that text_add puts at a position (the convention in the module docstring)."""
    W, H = scene.width, scene.height
    col, row = CELLS[position]
    margin = round(0.05 * min(W, H))
    size = max(10, round(0.10 * H))
    while size > 10:
        left, top, r, b = font(size).getbbox(text)
        if r - left <= W / 3 - margin - 8:
            break
        size -= 1
    left, top, r, b = font(size).getbbox(text)
    w, h = r - left, b - top
    ix = (margin, (W - w) / 2, W - margin - w)[col]
    iy = (margin, (H - h) / 2, H - margin - h)[row]
    return Text(tid, text, int(round(ix - left)), int(round(iy - top)), size, text_color(scene))


def text_color(scene: EditScene) -> tuple[int, int, int]:
    """Black text on a light background, white on a dark one."""
    light = np.mean([sum(c) / 3 for c in scene.background["colors"]]) > 128
    return TEXT_DARK if light else TEXT_LIGHT


def apply(scene: EditScene, s: Subtask, touch: tuple) -> EditScene:
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


def states(task: EditTask) -> list[EditScene]:
    """The scene before the first subtask and after each one."""
    out = [task.scene]
    for s, touch in zip(task.subtasks, task.touches):
        out.append(apply(out[-1], s, touch))
    return out


def expected_image(task: EditTask) -> np.ndarray:
    """The ideal result, at its final size (an upscale is bicubic)."""
    final = states(task)[-1]
    img = render(final)
    size = final_size(final)
    return img if size == (final.width, final.height) else cv2.resize(img, size, interpolation=cv2.INTER_CUBIC)


def input_image(task: EditTask) -> np.ndarray:
    return render(task.scene)

"""FSD's intermediate representations as data, in image pixels: points, boxes, visual traces, relation graphs.

A policy speaks a 0–1000 grid (policies.formats.fsd); everything here is in pixels of the image it was shown, with
pixel i's centre at i (OpenCV). The one conversion between the two is toolpath.coords'
CoordinateSpace("grid1000", w, h): `from_grid` / `to_grid` below only apply it to points and boxes (a grid
point goes to the integer pixel that holds it; a pixel comes back as the grid point of its centre).

`lift` takes a pixel to the world with a depth image and the camera (K, and E world → camera, as
tools/spatial3d uses them), `same_object` is the name match of the self-consistency check (ask which object
lies at a proposed point; compare the reply with the object meant), and `draw` renders the step artifact a
user looks at: boxes with labels, points, the trace as a numbered polyline.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..coords import CoordinateSpace

# ---- points and boxes -----------------------------------------------------------------------------------


def _number(v, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
        raise ValueError(f"{what}: {v!r} is not a finite number")
    return float(v)


@dataclass(frozen=True)
class Point:
    x: float
    y: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "x", _number(self.x, "Point x"))
        object.__setattr__(self, "y", _number(self.y, "Point y"))

    @classmethod
    def of(cls, p) -> Point:
        """A Point from a Point, an (x, y) pair or a 2-element array."""
        if isinstance(p, Point):
            return p
        if isinstance(p, (str, bytes)) or not hasattr(p, "__len__") or len(p) != 2:
            raise ValueError(f"expected a point [x, y], got {p!r}")
        return cls(p[0], p[1])

    def __iter__(self):
        """`x, y = point` works, so a Point goes wherever an (x, y) pair does."""
        return iter((self.x, self.y))

    def distance(self, other) -> float:
        o = Point.of(other)
        return math.hypot(self.x - o.x, self.y - o.y)

    def as_list(self) -> list[float]:
        return [self.x, self.y]


@dataclass(frozen=True)
class Box:
    """An axis-aligned box, xyxy, edges included."""

    x1: float
    y1: float
    x2: float
    y2: float

    def __post_init__(self) -> None:
        for name in ("x1", "y1", "x2", "y2"):
            object.__setattr__(self, name, _number(getattr(self, name), f"Box {name}"))
        if self.x1 > self.x2 or self.y1 > self.y2:
            raise ValueError(f"Box {self.as_list()} needs x1 <= x2 and y1 <= y2")

    @classmethod
    def of(cls, b) -> Box:
        if isinstance(b, Box):
            return b
        if isinstance(b, (str, bytes)) or not hasattr(b, "__len__") or len(b) != 4:
            raise ValueError(f"expected a box [x1, y1, x2, y2], got {b!r}")
        return cls(*b)

    @property
    def width(self) -> float:
        return self.x2 - self.x1

    @property
    def height(self) -> float:
        return self.y2 - self.y1

    @property
    def centre(self) -> Point:
        return Point((self.x1 + self.x2) / 2, (self.y1 + self.y2) / 2)

    @property
    def area(self) -> float:
        return self.width * self.height

    def contains(self, p) -> bool:
        q = Point.of(p)
        return self.x1 <= q.x <= self.x2 and self.y1 <= q.y <= self.y2

    def iou(self, other) -> float:
        """Intersection over union; 0 when the union has no area (two degenerate boxes)."""
        o = Box.of(other)
        w = max(0.0, min(self.x2, o.x2) - max(self.x1, o.x1))
        h = max(0.0, min(self.y2, o.y2) - max(self.y1, o.y1))
        inter = w * h
        union = self.area + o.area - inter
        return inter / union if union > 0 else 0.0

    def as_list(self) -> list[float]:
        return [self.x1, self.y1, self.x2, self.y2]


@dataclass(frozen=True)
class Trace:
    """An ordered path of points (FSD's visual trace: where the picked object goes, start to end)."""

    points: tuple[Point, ...]

    def __post_init__(self) -> None:
        pts = tuple(Point.of(p) for p in self.points)
        if not pts:
            raise ValueError("a Trace needs at least one point")
        object.__setattr__(self, "points", pts)

    @classmethod
    def of(cls, t) -> Trace:
        return t if isinstance(t, Trace) else cls(tuple(t))

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self):
        return iter(self.points)

    @property
    def start(self) -> Point:
        return self.points[0]

    @property
    def end(self) -> Point:
        return self.points[-1]

    def length(self) -> float:
        """Arc length: the sum of the segment lengths."""
        return sum(a.distance(b) for a, b in zip(self.points, self.points[1:]))

    def resample(self, n: int) -> Trace:
        """n points evenly spaced by arc length along the polyline, first and last kept. A trace of zero
        length (one point, or all points equal) gives n copies of its first point."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"resample: n must be a positive integer, got {n!r}")
        xy = self.array()
        seg = np.hypot(*np.diff(xy, axis=0).T) if len(xy) > 1 else np.zeros(0)
        cum = np.concatenate([[0.0], np.cumsum(seg)])
        total = cum[-1]
        if total == 0:
            return Trace(tuple(self.points[0] for _ in range(n)))
        if n == 1:
            return Trace((self.points[0],))
        at = np.linspace(0.0, total, n)
        x = np.interp(at, cum, xy[:, 0])
        y = np.interp(at, cum, xy[:, 1])
        return Trace(tuple(Point(a, b) for a, b in zip(x, y)))

    def array(self) -> np.ndarray:
        return np.array([[p.x, p.y] for p in self.points], dtype=np.float64)

    def as_list(self) -> list[list[float]]:
        return [p.as_list() for p in self.points]

    @classmethod
    def from_grid(cls, points, width: int, height: int) -> Trace:
        return cls(tuple(points_from_grid(points, width, height)))


# ---- the grid ↔ pixels, through the one conversion ------------------------------------------------------

def _space(width: int, height: int) -> CoordinateSpace:
    return CoordinateSpace("grid1000", int(width), int(height))


def from_grid(x: float, y: float, width: int, height: int) -> Point:
    """The pixel (integer coordinates) a grid point falls in; ValueError off the grid."""
    px, py = _space(width, height).to_screen(x, y)
    return Point(px, py)


def to_grid(p, width: int, height: int) -> tuple[float, float]:
    """The grid point of a pixel's centre (rounded to whole grid units, as a model writes it)."""
    q = Point.of(p)
    return _space(width, height).from_screen(q.x, q.y)


def points_from_grid(points, width: int, height: int) -> list[Point]:
    return [from_grid(*Point.of(p).as_list(), width, height) for p in points]


def box_from_grid(box, width: int, height: int) -> Box:
    """A grid box → the box of the pixels its corners fall in (inclusive pixel indices)."""
    b = Box.of(box)
    space = _space(width, height)
    x1, y1 = space.to_screen(b.x1, b.y1)
    x2, y2 = space.to_screen(b.x2, b.y2)
    return Box(x1, y1, x2, y2)


def box_to_grid(box, width: int, height: int) -> list[float]:
    """A pixel box → its grid box (corner pixels' centres)."""
    b = Box.of(box)
    space = _space(width, height)
    return [*space.from_screen(b.x1, b.y1), *space.from_screen(b.x2, b.y2)]


# ---- names: the consistency check's match ---------------------------------------------------------------

_ARTICLES = {"the", "a", "an", "this", "that"}
_SYNONYMS = {"block": "cube", "blocks": "cube", "cubes": "cube", "dish": "plate", "dishes": "plate",
             "plates": "plate", "gray": "grey"}


def object_words(name: str | None) -> tuple[str, ...]:
    """A name as the words that matter: lower case, no punctuation or articles, "block" → cube, "dish" → plate."""
    if not isinstance(name, str):
        return ()
    words = re.sub(r"[^\w\s-]", " ", name.lower()).replace("-", " ").split()
    return tuple(_SYNONYMS.get(w, w) for w in words if w not in _ARTICLES)


def same_object(a: str | None, b: str | None) -> bool:
    """Whether two names name the same object: "The red block" ≈ "red cube"; "red cube" ≠ "red plate"."""
    wa, wb = object_words(a), object_words(b)
    return bool(wa) and wa == wb


# ---- relation graph -------------------------------------------------------------------------------------

@dataclass
class RelationGraph:
    objects: dict[str, Box] = field(default_factory=dict)            # name → box, in pixels
    relations: list[tuple[str, str, str]] = field(default_factory=list)

    @classmethod
    def from_answer(cls, answer, width: int, height: int) -> RelationGraph:
        """From a parsed FSD answer (policies.formats.fsd.FSDAnswer): its (name, grid box) objects in pixels, and its
        relations. A name given twice (ASMv2 lists several boxes under one name) gets "#2", "#3" …"""
        g = cls(relations=list(answer.relations))
        for name, box in answer.objects:
            key, k = name, 1
            while key in g.objects:
                k += 1
                key = f"{name} #{k}"
            g.objects[key] = box_from_grid(box, width, height)
        return g

    def find(self, name: str) -> tuple[str, Box] | None:
        """The object whose name matches (same_object), if any."""
        return next(((n, b) for n, b in self.objects.items() if same_object(n, name)), None)

    def describe(self) -> str:
        lines = [f"{n}: box [{b.x1:.0f}, {b.y1:.0f}, {b.x2:.0f}, {b.y2:.0f}] px, centre ({b.centre.x:.0f}, "
                 f"{b.centre.y:.0f})" for n, b in self.objects.items()]
        lines += [f"{s} {p} {o}" for s, p, o in self.relations]
        return "\n".join(lines) if lines else "no objects or relations"


# ---- pixels to the world --------------------------------------------------------------------------------

def lift(u: float, v: float, depth, K, E, window: int = 2) -> np.ndarray:
    """The world point (x, y, z) seen at pixel (u, v): the median of the valid depths (finite, > 0) in the
    (2·window+1)² pixels around it (clipped at the image edges), back-projected with K and E (world →
    camera). The median keeps a point near an object's edge on whichever surface most of the window sees.
    ValueError if (u, v) is off the image or no pixel of the window has a valid depth."""
    d = np.asarray(depth, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError(f"lift: depth must be an HxW array, got shape {d.shape}")
    K = np.asarray(K, dtype=np.float64)
    E = np.asarray(E, dtype=np.float64)
    if K.shape != (3, 3) or E.shape != (4, 4):
        raise ValueError(f"lift: K must be 3x3 and E 4x4, got {K.shape} and {E.shape}")
    h, w = d.shape
    u, v = _number(u, "lift u"), _number(v, "lift v")
    if not (-0.5 <= u < w - 0.5 and -0.5 <= v < h - 0.5):
        raise ValueError(f"lift: pixel ({u:g}, {v:g}) is outside the {w}x{h} depth image")
    if not isinstance(window, int) or window < 0:
        raise ValueError(f"lift: window must be a non-negative integer, got {window!r}")
    cu, cv = int(round(u)), int(round(v))
    patch = d[max(0, cv - window):cv + window + 1, max(0, cu - window):cu + window + 1]
    valid = patch[np.isfinite(patch) & (patch > 0)]
    if valid.size == 0:
        raise ValueError(f"lift: no valid depth within {window} px of pixel ({u:g}, {v:g})")
    z = float(np.median(valid))
    cam = z * (np.linalg.inv(K) @ np.array([u, v, 1.0]))
    Einv = np.linalg.inv(E)
    return Einv[:3, :3] @ cam + Einv[:3, 3]


# ---- drawing --------------------------------------------------------------------------------------------

_PALETTE = [(230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 240, 240),
            (240, 50, 230), (255, 225, 25)]


def _image(src):
    from PIL import Image

    if isinstance(src, Image.Image):
        return src.convert("RGB")
    if isinstance(src, (bytes, bytearray)):
        try:
            return Image.open(io.BytesIO(src)).convert("RGB")
        except OSError as err:
            raise ValueError(f"draw: the image bytes are not a readable image ({err})") from None
    if isinstance(src, (str, Path)):
        try:
            return Image.open(src).convert("RGB")
        except OSError as err:
            raise ValueError(f"draw: cannot read image {src}: {err}") from None
    arr = np.asarray(src)
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ValueError(f"draw: expected PNG bytes, a path, or an HxWx3 array, got shape {arr.shape}")
    if arr.dtype != np.uint8:
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    return Image.fromarray(arr[..., :3])


def draw(image, boxes=None, points=None, trace=None, labels=None) -> bytes:
    """PNG bytes of `image` (PNG bytes, a path, an array or a PIL image) with, in pixels: `boxes` outlined
    and labelled with `labels` (one per box), `points` as dots, `trace` as a polyline with each waypoint
    numbered from 1 (the start a square, the end a diamond, as FSD draws them)."""
    from PIL import ImageDraw

    from .image.fonts import builtin_font

    im = _image(image)
    dr = ImageDraw.Draw(im)
    boxes = [Box.of(b) for b in (boxes or [])]
    labels = list(labels or [])
    if labels and len(labels) != len(boxes):
        raise ValueError(f"draw: {len(labels)} label(s) for {len(boxes)} box(es)")
    scale = max(1, round(min(im.size) / 240))
    f = builtin_font(6 * scale + 4)
    for i, b in enumerate(boxes):
        c = _PALETTE[i % len(_PALETTE)]
        dr.rectangle([b.x1, b.y1, b.x2, b.y2], outline=c, width=scale)
        if labels:
            left, t, r, btm = dr.textbbox((0, 0), str(labels[i]), font=f)
            y = b.y1 - (btm - t) - 2 * scale if b.y1 - (btm - t) - 2 * scale >= 0 else b.y2 + scale
            dr.rectangle([b.x1, y, b.x1 + (r - left) + 2 * scale, y + (btm - t) + scale], fill=c)
            dr.text((b.x1 + scale - left, y - t), str(labels[i]), font=f, fill=(255, 255, 255))
    for p in (Point.of(q) for q in (points or [])):
        r = 3 * scale
        dr.ellipse([p.x - r - scale, p.y - r - scale, p.x + r + scale, p.y + r + scale], fill=(255, 255, 255))
        dr.ellipse([p.x - r, p.y - r, p.x + r, p.y + r], fill=(230, 25, 75))
    if trace is not None:
        t = Trace.of(trace)
        xy = [(p.x, p.y) for p in t]
        colour = (255, 40, 40)
        if len(xy) > 1:
            dr.line(xy, fill=colour, width=2 * scale, joint="curve")
        r = 3 * scale
        sx, sy = xy[0]
        dr.rectangle([sx - r, sy - r, sx + r, sy + r], fill=colour, outline=(255, 255, 255))
        if len(xy) > 1:
            ex, ey = xy[-1]
            dr.polygon([(ex, ey - r - scale), (ex + r + scale, ey), (ex, ey + r + scale), (ex - r - scale, ey)],
                       fill=(40, 40, 255), outline=(255, 255, 255))
        for x, y in xy[1:-1]:
            dr.ellipse([x - 2 * scale, y - 2 * scale, x + 2 * scale, y + 2 * scale], fill=colour)
        for k, (x, y) in enumerate(xy, 1):
            dr.text((x + r + scale, y - r - 3 * scale), str(k), font=f, fill=(255, 255, 255),
                    stroke_width=max(1, scale), stroke_fill=(0, 0, 0))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()

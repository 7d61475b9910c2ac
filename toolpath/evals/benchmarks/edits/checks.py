"""Checking an edited image against its task, per subtask, by pixels (the tests of the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import cv2
import numpy as np
from PIL import Image

from ....tools.image.edit_base import COLORS
from ....tools.image.quality import dilate, erode
from .scene import (
    CELLS,
    NAMES,
    TOL,
    EditScene,
    EditTask,
    color_names,
    delta_e_rgb,
    final_size,
    object_mask,
    render,
    states,
    text_box,
    text_mask,
    texture_scale,
)


@dataclass(frozen=True)
class SubtaskResult:
    id: str
    kind: str
    ok: bool
    detail: str


# ---- checking --------------------------------------------------------------------------------------------

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
            return dilate(m, 4 if s.kind == "recolor" else 8)
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
            return ~erode(fg, 3, min_pixels=30)
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
        de = delta_e_rgb(g[m], e[m])
        med, p90 = float(np.median(de)), float(np.percentile(de, 90))
        ok = med <= TOL["bg_median"] and p90 <= TOL["bg_p90"]
        return ok, f"region vs expected background ΔE median {med:.1f}, p90 {p90:.1f}"

    def recolor(self, i: int) -> tuple[bool, str]:
        s, o = self.task.subtasks[i], self.final.obj(self.task.touches[i][1])
        m = erode(object_mask(o, self.W, self.H), 2, min_pixels=30)
        frac = self._names_frac(self.got, m, s.params["color"])
        return frac >= TOL["recolor_frac"], f"{frac:.0%} of the object is {s.params['color']} (need 80%)"

    def remove(self, i: int) -> tuple[bool, str]:
        o = self.scenes[i].obj(self.task.touches[i][1])
        m = erode(object_mask(o, self.W, self.H), 1, min_pixels=30)
        gone, left = self._gone(m, o.color)
        like, detail = self._like_background(m)
        return gone and like, f"{max(left, 0):.0%} still {o.color}; {detail}"

    def replace(self, i: int) -> tuple[bool, str]:
        s, touch = self.task.subtasks[i], self.task.touches[i]
        old, new = self.scenes[i].obj(touch[1]), self.final.obj(touch[1])
        W, H = self.W, self.H
        new_mask = object_mask(new, W, H)
        near = dilate(_rect(old.box, W, H) | new_mask, 6)
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
        leftover = erode(object_mask(old, W, H), 1, min_pixels=30) & ~dilate(blob | new_mask, 4)
        if leftover.sum() >= 30 and old.color != s.params["color"]:
            left = (self._names_frac(self.got, leftover, old.color)
                    - self._names_frac(self.expected, leftover, old.color))
            if left > TOL["replace_left"]:
                problems.append(f"{left:.0%} of the old object's remaining area is still {old.color}")
        return not problems, "; ".join(problems) or f"a {s.params['color']} {shape} ({area:.2f}× the expected area)"

    def _ink(self, without: EditScene, region: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ink in the image, ink expected) in a region: pixels unlike the scene rendered without a text."""
        clean = render(without)
        ink_got = np.zeros_like(region)
        ink_exp = np.zeros_like(region)
        ink_got[region] = delta_e_rgb(self.got[region], clean[region]) > TOL["ink_de"]
        ink_exp[region] = delta_e_rgb(self.expected[region], clean[region]) > TOL["ink_de"]
        return ink_got, ink_exp

    def text_remove(self, i: int) -> tuple[bool, str]:
        m = dilate(text_mask(self.scenes[i].text(self.task.touches[i][1]), self.W, self.H), 1)
        left = float((delta_e_rgb(self.got[m], self.expected[m]) > TOL["ink_de"]).mean())
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
        bgm = ~dilate(fg, 4)
        de = delta_e_rgb(self.got[bgm], np.broadcast_to(np.array(COLORS[color], np.float32), (int(bgm.sum()), 3)))
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

"""Generating edit tasks: a scene and an instruction of 1–4 subtasks, under the fairness rules of the package
docstring, deterministic from (seed, index)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np

from ....tools.image.edit_base import COLORS, KINDS, POSITIONS, SHAPES, Subtask, Target
from ....tools.image.fonts import font
from .scene import (
    BG_KINDS,
    CELLS,
    CONTRAST,
    DARK_BG,
    GAP,
    LIGHT_BG,
    N_TASKS,
    NAMES,
    SIZES,
    WORDS_ADD,
    WORDS_LONG,
    WORDS_SHORT,
    EditScene,
    EditTask,
    Obj,
    Text,
    color_names,
    delta_e_rgb,
    render,
    states,
    text_color,
)

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
    de = delta_e_rgb(np.array([COLORS[color]] * len(cols), np.float32), np.array(cols, np.float32))
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

    def scene(self) -> EditScene:
        return EditScene(self.W, self.H, self.bg, tuple(self.objects), tuple(self.texts))

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
        left, top, r, b = font(size).getbbox(word)
        x0, y0, _, _ = self.place(r - left, b - top)
        t = Text(self.next_id, word, x0 - left, y0 - top, size, text_color(self.scene()))
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
                far = delta_e_rgb(np.array(COLORS[color], np.float32), np.array(COLORS[o.color], np.float32)) >= 25
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
                       and delta_e_rgb(np.broadcast_to(np.array(COLORS[c], np.float32), old.shape), old).min() >= 25]
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
    from ....planners.subtasks import infer_parents

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


def subtask_samples(n_tasks: int, seed: int) -> list[tuple[np.ndarray, Subtask]]:
    """One (image, subtask) per subtask of `n_tasks` generated tasks, each image the scene just before that
    subtask: what `toolpath tools calibrate` measures the tools on (use a seed other than the benchmark's,
    so priors are not fitted to the tasks they are judged on)."""
    out = []
    for task in generate(n_tasks, seed):
        for scene, s in zip(states(task), task.subtasks):
            out.append((render(scene), s))
    return out

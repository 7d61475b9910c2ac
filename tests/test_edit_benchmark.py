"""The procedurally generated edit benchmark: deterministic generation that covers every kind and 1–4 steps
with unambiguous targets, instructions that the grammar reads back, and program checks that are fair — the
ideal edit and an OpenCV-quality edit (Telea inpainting, HSV recolour, text redrawn in another font, bicubic
upscale) pass, a no-op, a skipped subtask and a wrong edit fail — plus the `Edits` adapter and its scorer."""

import json
from collections import Counter
from dataclasses import replace

import cv2
import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from toolpath.evals.benchmarks import edits as E
from toolpath.evals.benchmarks.edits import checks, generation, scene
from toolpath.planners.subtasks import parse_instruction
from toolpath.tools.image import fonts
from toolpath.tools.image.edit_base import COLORS, KINDS, SHAPES
from toolpath.tools.image.features import shape_outline


@pytest.fixture(scope="module")
def suite():
    return E.generate(200, seed=0)


def owners(task):
    """Indices of the subtasks whose own check runs (the last edit of each object or text, every global one)."""
    last = {}
    for i, touch in enumerate(task.touches):
        last[touch if touch[0] in ("obj", "text") else ("self", i)] = i
    return sorted(last.values())


@pytest.fixture(scope="module")
def sample(suite):
    """Two tasks per kind in which that kind's own check runs, one short and one long where possible."""
    picked = {}
    for kind in KINDS:
        hits = [t for t in suite if any(t.subtasks[i].kind == kind for i in owners(t))]
        for t in (min(hits, key=lambda t: t.steps), max(hits, key=lambda t: t.steps)):
            picked[t.id] = t
    return list(picked.values())


# ---- OpenCV-quality edits from the ground truth: what a correct tool chain does --------------------------

def _dil(m, r):
    return cv2.dilate(m.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))) > 0


def _fit(mask, img):
    if mask.shape == img.shape[:2]:
        return mask
    return cv2.resize(mask.astype(np.uint8), (img.shape[1], img.shape[0]), interpolation=cv2.INTER_NEAREST) > 0


def _inpaint(img, mask, r=3):
    return cv2.inpaint(img, _dil(mask, r).astype(np.uint8) * 255, 5, cv2.INPAINT_TELEA)


def _hsv_recolor(img, mask, color):
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV_FULL).astype(np.float32)
    t = cv2.cvtColor(np.uint8([[COLORS[color]]]), cv2.COLOR_RGB2HSV_FULL).astype(np.float32)[0, 0]
    v = hsv[..., 2][mask]
    hsv[..., 0][mask], hsv[..., 1][mask] = t[0], t[1]
    hsv[..., 2][mask] = np.clip(v * t[2] / max(float(np.median(v)), 1.0), 0, 255)
    return cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2RGB_FULL)


def _draw_shape(img, shape, box, color, k):
    how, pts = shape_outline(shape, box)
    pts = np.array(pts) * k
    out = img.copy()
    if how == "ellipse":
        (x0, y0), (x1, y1) = pts
        cv2.ellipse(out, (int((x0 + x1) / 2), int((y0 + y1) / 2)), (int((x1 - x0) / 2), int((y1 - y0) / 2)), 0, 0,
                    360, COLORS[color], -1, cv2.LINE_AA)
    else:
        cv2.fillPoly(out, [np.round(pts).astype(np.int32)], COLORS[color], cv2.LINE_AA)
    return out


def _other_font(size, serif):
    """A font other than the benchmark's (DejaVu Sans Bold), so a redrawn text is not pixel-identical."""
    path = fonts.font_path()
    if path:
        other = path.replace("DejaVuSans-Bold.ttf", "DejaVuSerif-Bold.ttf" if serif else "DejaVuSans.ttf")
        try:
            return ImageFont.truetype(other, size)
        except OSError:
            pass
    return ImageFont.load_default(size)


def _write(img, text, xy, size, color, serif):
    im = Image.fromarray(img)
    ImageDraw.Draw(im).text(xy, text, font=_other_font(size, serif), fill=tuple(int(c) for c in color))
    return np.asarray(im).copy()


def opencv_edit(task):
    scenes = E.states(task)
    img = E.input_image(task).copy()
    written = {}  # text id → mask of what this editor wrote (a tool finds its own text, not the benchmark's)
    for i, (s, touch) in enumerate(zip(task.subtasks, task.touches)):
        before, after = scenes[i], scenes[i + 1]
        W, H = before.width, before.height
        k = img.shape[1] / W
        if s.kind in ("recolor", "remove", "replace"):
            m = _fit(E.object_mask(before.obj(touch[1]), W, H), img)
            if s.kind == "recolor":
                img = _hsv_recolor(img, _dil(m, 1), s.params["color"])
            else:
                img = _inpaint(img, m)
                if s.kind == "replace":
                    img = _draw_shape(img, s.params["shape"], after.obj(touch[1]).box, s.params["color"], k)
        elif s.kind in ("text_remove", "text_replace"):
            t = before.text(touch[1])
            m = written.get(touch[1], _fit(E.text_mask(t, W, H), img))
            ink = np.median(img[m], axis=0)
            img = _inpaint(img, m, 2)
            if s.kind == "text_replace":
                new = _write(img, s.params["text"], (t.x * k, t.y * k), int(t.size * k), ink, serif=True)
                written[touch[1]], img = np.any(new != img, axis=-1), new
        elif s.kind == "text_add":
            col, row = E.CELLS[s.params["position"]]
            cw, ch = img.shape[1] / 3, img.shape[0] / 3
            size = int(0.09 * img.shape[0])
            left, top, r, b = _other_font(size, False).getbbox(s.params["text"])
            x = (col * cw + 12 * k, col * cw + (cw - (r - left)) / 2, (col + 1) * cw - 12 * k - (r - left))[col]
            y = (row * ch + 12 * k, row * ch + (ch - (b - top)) / 2, (row + 1) * ch - 12 * k - (b - top))[row]
            cell = img[int(row * ch):int((row + 1) * ch), int(col * cw):int((col + 1) * cw)]
            new = _write(img, s.params["text"], (x - left, y - top), size,
                         (0, 0, 0) if cell.mean() > 128 else (255, 255, 255), serif=False)
            written[touch[1]], img = np.any(new != img, axis=-1), new
        elif s.kind == "background":
            fg = np.zeros((H, W), bool)
            for o in before.objects:
                fg |= E.object_mask(o, W, H)
            img = img.copy()
            img[~_fit(fg, img)] = COLORS[s.params["color"]]
        else:
            f = float(s.params["factor"])
            img = cv2.resize(img, (round(img.shape[1] * f), round(img.shape[0] * f)), interpolation=cv2.INTER_CUBIC)
    return img


def variant(task, i, drop=False, **changes):
    """The ideal image had subtask i been done differently, or not at all."""
    subs, touches = list(task.subtasks), list(task.touches)
    if drop:
        del subs[i], touches[i]
    else:
        subs[i] = replace(subs[i], **changes)
    return E.expected_image(replace(task, subtasks=subs, touches=touches))


def _far_color(c, task):
    """The colour farthest from c that still stands out on the task's final background."""
    final_bg = [E.states(task)[-1].background["colors"]]
    return max((n for n in COLORS if n != c and generation._contrasts(n, final_bg)),
               key=lambda n: float(E.delta_e_rgb(np.float32(COLORS[n]), np.float32(COLORS[c]))))


OPPOSITE = {"top left": "bottom right", "top": "bottom", "top right": "bottom left", "left": "right",
            "center": "top left", "right": "left", "bottom left": "top right", "bottom": "top",
            "bottom right": "top left"}
WRONG_SHAPE = {"circle": "square", "square": "circle", "rectangle": "ellipse", "ellipse": "rectangle",
               "triangle": "star", "star": "triangle"}


def wrong_edit(task, i):
    """A plausible mistake for subtask i: the wrong colour, shape, text, place or size, or not removing."""
    s, p = task.subtasks[i], task.subtasks[i].params
    if s.kind in ("recolor", "background"):
        return variant(task, i, params={"color": _far_color(p["color"], task)})
    if s.kind == "remove":  # recoloured instead of removed
        o = E.states(task)[i].obj(task.touches[i][1])
        return variant(task, i, kind="recolor", params={"color": _far_color(o.color, task)})
    if s.kind == "replace":
        return variant(task, i, params={"color": p["color"], "shape": WRONG_SHAPE[p["shape"]]})
    if s.kind == "text_remove":
        return variant(task, i, drop=True)
    if s.kind == "text_replace":  # a text as long as the old one
        return variant(task, i, params={"old": p["old"], "text": p["old"][::-1]})
    if s.kind == "text_add":
        return variant(task, i, params={"text": p["text"], "position": OPPOSITE[p["position"]]})
    return variant(task, i, params={"factor": 3})


# ---- generation -------------------------------------------------------------------------------------------

def test_generation_is_deterministic_by_seed(suite):
    again = E.generate(200, seed=0)
    assert [repr(t) for t in again] == [repr(t) for t in suite]
    other = E.generate(20, seed=1)
    assert [t.instruction for t in other] != [t.instruction for t in suite[:20]]
    assert np.array_equal(E.input_image(suite[5]), E.input_image(E.make_task(0, 5)))


def test_suite_covers_every_kind_steps_backgrounds_and_text(suite):
    assert len(suite) >= 200 and len({t.id for t in suite}) == len(suite)
    kinds = Counter(s.kind for t in suite for s in t.subtasks)
    assert set(kinds) == set(KINDS) and min(kinds.values()) >= 20
    assert Counter(t.category for t in suite) == {"1 step": 50, "2 steps": 50, "3 steps": 50, "4 steps": 50}
    assert {t.scene.background["kind"] for t in suite} == set(E.BG_KINDS)
    assert {(t.scene.width, t.scene.height) for t in suite} == set(E.SIZES)
    assert all(2 <= len(t.scene.objects) <= 5 for t in suite)
    assert sum(bool(t.scene.texts) for t in suite) >= 40
    assert all(len({s.kind for s in t.subtasks}) >= 2 for t in suite if t.steps > 1)  # tasks mix kinds
    assert {(t.subtasks[0].kind, t.steps) for t in suite if t.steps == 1} == {(k, 1) for k in KINDS}


def test_targets_are_unique_when_each_subtask_runs(suite):
    for t in suite:
        for s, touch, before in zip(t.subtasks, t.touches, E.states(t)):
            if s.kind in ("recolor", "remove", "replace"):
                matches = [o for o in before.objects if o.shape == s.target.shape
                           and (s.target.color is None or o.color == s.target.color)]
                assert [o.id for o in matches] == [touch[1]], (t.id, s)
            if s.kind in ("text_remove", "text_replace"):
                ref = s.params.get("old", s.params.get("text"))
                matches = [x for x in before.texts if ref is None or x.text == ref]
                assert [x.id for x in matches] == [touch[1]], (t.id, s)
                assert t.scene.text(touch[1]) is not None  # a text the task added is not undone
            if s.kind == "text_replace":
                assert fonts.font(14).getlength(s.params["text"]) <= 0.6 * fonts.font(14).getlength(s.params["old"]) + 2


def test_objects_and_texts_do_not_overlap(suite):
    for t in suite:
        W, H = t.scene.width, t.scene.height
        for state in E.states(t):
            masks = [E.object_mask(o, W, H) for o in state.objects] + [E.text_mask(x, W, H) for x in state.texts]
            assert (np.sum(masks, axis=0) <= 1).all(), t.id


def test_every_instruction_parses_back_to_what_the_generator_meant(suite):
    for t in suite:
        got = parse_instruction(t.instruction)
        assert [(s.kind, s.target, s.params) for s in got] == [(s.kind, s.target, s.params) for s in t.subtasks], \
            t.instruction
        for j, touch in enumerate(t.touches):  # an edit of an object or text depends on its earlier edits
            for i in range(j):
                if touch[0] in ("obj", "text") and t.touches[i] == touch:
                    assert got[i].id in got[j].parents, (t.instruction, i, j)


# ---- checks ----------------------------------------------------------------------------------------------

def test_the_expected_image_passes_every_subtask(sample):
    for t in sample:
        results = E.check(t, E.expected_image(t))
        assert [r.id for r in results] == [s.id for s in t.subtasks]
        assert all(r.ok for r in results), (t.instruction, [r.detail for r in results if not r.ok])


def test_an_opencv_quality_edit_passes_every_subtask(sample):
    for t in sample:
        results = E.check(t, opencv_edit(t))
        assert all(r.ok for r in results), (t.instruction, [(r.kind, r.detail) for r in results if not r.ok])


def test_a_no_op_fails_every_subtask(sample):
    for t in sample:
        results = E.check(t, E.input_image(t))
        assert not any(r.ok for r in results), (t.instruction, [(r.kind, r.detail) for r in results if r.ok])


def test_a_wrong_or_skipped_edit_fails_that_subtask(sample):
    seen = set()
    for t in sample:
        for i in owners(t):
            kind = t.subtasks[i].kind
            wrong = E.check(t, wrong_edit(t, i))
            assert not wrong[i].ok, (t.instruction, kind, "wrong", wrong[i].detail)
            if kind != "text_remove":  # its wrong edit already is the skip
                skipped = E.check(t, variant(t, i, drop=True))
                assert not skipped[i].ok, (t.instruction, kind, "skipped", skipped[i].detail)
            seen.add(kind)
    assert seen == set(KINDS)


def test_a_subtask_redone_later_is_judged_through_the_later_edit(suite):
    t = next(t for t in suite if len(set(t.touches)) < len(t.touches) and t.touches[0][0] == "obj"
             and t.touches.count(t.touches[0]) > 1)
    results = E.check(t, E.expected_image(t))
    later = max(i for i, x in enumerate(t.touches) if x == t.touches[0])
    assert results[0].ok and f"seen through {t.subtasks[later].id}" in results[0].detail


def test_damage_outside_the_edited_regions_fails(sample):
    t = next(t for t in sample if "upscale" not in [s.kind for s in t.subtasks] and t.steps == 1)
    img = E.expected_image(t).copy()
    keep = ~np.any(checks._Checker(t, img).regions, axis=0)
    ys, xs = np.nonzero(keep)
    img[ys[: len(ys) // 10], xs[: len(xs) // 10]] = (255, 0, 255)  # paint over a tenth of the untouched part
    results = E.check(t, img)
    assert not any(r.ok for r in results) and "untouched" in results[0].detail


def test_wrong_size_fails_every_subtask_and_a_non_image_is_an_error(suite):
    t = suite[0]
    small = cv2.resize(E.expected_image(t), (100, 80))
    assert all(not r.ok and "expected" in r.detail for r in E.check(t, small))
    with pytest.raises(ValueError, match="shape"):
        E.check(t, np.zeros((10, 10, 5), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        E.check(t, np.zeros((t.scene.height, t.scene.width, 3), np.float64))
    # RGBA and PIL images are accepted
    rgba = np.dstack([E.expected_image(t), np.full((t.scene.height, t.scene.width), 255, np.uint8)])
    assert all(r.ok for r in E.check(t, rgba))
    assert all(r.ok for r in E.check(t, Image.fromarray(E.expected_image(t))))


@pytest.mark.parametrize("shape", SHAPES)
def test_shapes_are_classified_whoever_draws_them(shape):
    box = (20, 30, 132, 100) if shape in ("ellipse", "rectangle") else (30, 20, 110, 100)
    ours = scene._alpha_crop(shape, box, 160, 130)
    mask = np.zeros((130, 160), bool)
    (x0, y0, x1, y1), a = ours
    mask[y0:y1, x0:x1] = a > 0.5
    assert E.classify_shape(mask) == shape
    drawn = _draw_shape(np.zeros((130, 160, 3), np.uint8), shape, box, "white", 1)[..., 0] > 127
    assert E.classify_shape(drawn) == shape
    assert E.classify_shape(np.zeros((10, 10), bool)) is None


# ---- the adapter ------------------------------------------------------------------------------------------

def test_records_are_per_task_with_steps_as_category():
    bench = E.Edits()
    records = list(bench.records())
    assert len(records) == 200 and len({r.id for r in records}) == 200
    assert {r.category for r in records} == set(E.Edits.categories)
    quick = list(bench.records(limit=4))
    assert sorted(r.category for r in quick) == sorted(E.Edits.categories)
    r = records[7]
    assert r.data["seed"] == 0 and r.data["index"] == 7 and r.data["instruction"] == E.make_task(0, 7).instruction


def test_to_task_writes_the_input_image_once_and_points_the_agent_at_it(home):
    bench = E.Edits()
    record = list(bench.records(seed=3))[0]
    spec = bench.to_task(record, model="local")
    path = home / "benchmarks" / "edits" / "seed3" / f"{record.id}.png"
    assert spec.inputs.images == [path] and path.is_file()
    assert spec.agent.name == "fast_slow" and spec.evaluator is None and spec.instruction == record.data["instruction"]
    assert spec.metadata["seed"] == 3 and spec.metadata["index"] == record.data["index"]
    task = bench.task(record)
    assert np.array_equal(np.asarray(Image.open(path)), E.input_image(task))
    stamp = path.stat().st_mtime_ns
    bench.to_task(record)
    assert path.stat().st_mtime_ns == stamp  # reused, not rewritten


def test_score_is_one_for_a_correct_edit_and_per_subtask_results_name_each(home, tmp_path):
    bench = E.Edits()
    record = next(r for r in bench.records() if r.category == "3 steps")
    task = bench.task(record)
    out = tmp_path / "edited.png"
    Image.fromarray(E.expected_image(task)).save(out)
    answer = json.dumps({"image": str(out), "subtasks": [], "cost_s": 1.0})
    assert bench.score(record, answer) == 1.0
    assert bench.score(record, f"Done. {answer} Bye.") == 1.0  # JSON inside prose
    results = bench.subtask_success(record, answer)
    assert [(r.id, r.kind, r.ok) for r in results] == [(s.id, s.kind, True) for s in task.subtasks]
    Image.fromarray(E.input_image(task)).save(out)
    assert bench.score(record, answer) == 0.0


def test_garbage_answers_score_zero_without_raising(tmp_path):
    bench = E.Edits()
    record = list(bench.records(limit=1))[0]
    text_file = tmp_path / "not.png"
    text_file.write_text("hello")
    tiny = tmp_path / "tiny.png"
    Image.new("RGB", (7, 5)).save(tiny)
    for answer in (None, "", "not json", "{}", "[1, 2]", '{"image": 3}', '{"image": ""}',
                   json.dumps({"image": str(tmp_path / "missing.png")}), json.dumps({"image": str(text_file)}),
                   json.dumps({"image": str(tiny)}), '{"image": "x"', 42):
        assert bench.score(record, answer) == 0.0, answer
        results = bench.subtask_success(record, answer)
        assert results and not any(r.ok for r in results) and all(r.detail for r in results)

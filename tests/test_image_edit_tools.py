"""The OpenCV edit tools of FaSTA* (locate, fill, paint, text) and their checks, on images drawn here:
shapes drawn with OpenCV on uniform, gradient, noise, striped and checkered backgrounds, text drawn with PIL.
Each test asserts what the tool's output is (a mask's IoU with the drawn shape, the colours of pixels, what an
OCR reads back) and that each check scores a good result above a bad one."""

import cv2
import numpy as np
import pytest
from PIL import Image, ImageDraw

from toolpath.tools.image import features as F
from toolpath.tools.image import preconditions as P
from toolpath.tools.image import quality as Q
from toolpath.tools.image import text as T
from toolpath.tools.image.edit_base import COLORS, STAGES, EditError, EditState, Subtask, Target, edit_tools, run_step

W, H = 512, 384
LIGHT, LIGHT2 = (232, 226, 210), (204, 194, 178)
BACKGROUNDS = ("uniform", "gradient", "noise", "stripes", "checker")
TOOLS = edit_tools()


def background(kind: str, light: bool = True) -> np.ndarray:
    a, b = (np.array(LIGHT, np.float32), np.array(LIGHT2, np.float32)) if light else \
        (np.array((50, 58, 76), np.float32), np.array((74, 82, 100), np.float32))
    y, x = np.mgrid[0:H, 0:W].astype(np.float32)
    if kind == "uniform":
        t = np.zeros((H, W), np.float32)
    elif kind == "gradient":
        t = x / (W - 1)
    elif kind == "noise":
        t = np.zeros((H, W), np.float32)
    elif kind == "stripes":
        t = ((x // 12) % 2).astype(np.float32)
    elif kind == "checker":
        t = (((x // 20) + (y // 20)) % 2).astype(np.float32)
    else:
        raise ValueError(kind)
    img = a * (1 - t[..., None]) + b * t[..., None]
    if kind == "noise":
        img += np.random.default_rng(0).normal(0, 6, img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def draw(img: np.ndarray, shape: str, color: str, center, size: int) -> np.ndarray:
    """Draws a shape anti-aliased on `img` (in place) and returns its mask as drawn without anti-aliasing."""
    col = tuple(int(c) for c in COLORS[color])
    truth = np.zeros(img.shape[:2], np.uint8)
    cx, cy = center
    for target, aa in ((img, cv2.LINE_AA), (truth, cv2.LINE_8)):
        c = col if target is img else 1
        if shape == "circle":
            cv2.circle(target, (cx, cy), size, c, -1, aa)
        elif shape == "square":
            pts = np.array([[cx - size, cy - size], [cx + size, cy - size], [cx + size, cy + size],
                            [cx - size, cy + size]])
            cv2.fillPoly(target, [pts], c, aa)
        elif shape == "triangle":
            cv2.fillPoly(target, [np.array([[cx, cy - size], [cx + size, cy + size], [cx - size, cy + size]])], c, aa)
        elif shape == "star":
            k = np.arange(10)
            r = np.where(k % 2 == 0, size, 0.45 * size)
            a = -np.pi / 2 + k * np.pi / 5
            pts = np.stack([cx + r * np.cos(a), cy + r * np.sin(a)], 1).round().astype(np.int32)
            cv2.fillPoly(target, [pts], c, aa)
        elif shape == "ellipse":
            cv2.ellipse(target, (cx, cy), (int(size * 1.6), size), 0, 0, 360, c, -1, aa)
    return truth.astype(bool)


def scene(kind: str = "uniform", light: bool = True):
    """A red circle, a blue square, a green triangle and a purple star; returns (image, {name: mask})."""
    img = background(kind, light)
    masks = {"red circle": draw(img, "circle", "red", (130, 120), 55),
             "blue square": draw(img, "square", "blue", (370, 110), 50),
             "green triangle": draw(img, "triangle", "green", (140, 290), 60),
             "purple star": draw(img, "star", "purple", (380, 285), 65)}
    return img, masks


def write(img: np.ndarray, text: str, xy, size: int, color=(20, 20, 20)) -> np.ndarray:
    im = Image.fromarray(img)
    ImageDraw.Draw(im).text(xy, text, font=T.font(size), fill=color)
    return np.asarray(im).copy()


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max((a | b).sum(), 1))


def target(name: str) -> Target:
    words = name.split()
    color = next((w for w in words if w in COLORS), None)
    shape = next((w for w in words if w in ("circle", "square", "triangle", "star", "ellipse", "rectangle")), None)
    return Target(name, color, shape)


def locate(tool: str, img: np.ndarray, name: str, kind: str = "recolor", **params) -> tuple[EditState, Subtask]:
    s = Subtask("s1", kind, target(name), params)
    return TOOLS[tool].fn(EditState(image=img), s), s


def check(tool: str, before: EditState, after: EditState, s: Subtask) -> float:
    return float(TOOLS[tool].check(before, after, s))


# ---- locate ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", BACKGROUNDS)
def test_color_segment_finds_the_red_circle_on_every_background(kind):
    img, masks = scene(kind)
    before = img.copy()
    st, s = locate("color_segment", img, "red circle")
    assert iou(st.mask, masks["red circle"]) >= 0.9
    assert (img == before).all()  # the input is never changed
    assert check("color_segment", EditState(image=img), st, s) >= 0.8


@pytest.mark.parametrize("kind", ("stripes", "checker", "noise"))
def test_shape_segment_finds_a_shape_without_colour_on_textures(kind):
    img, masks = scene(kind)
    for name in ("star", "triangle", "circle", "square"):
        st, s = locate("shape_segment", img, name)
        truth = next(m for n, m in masks.items() if n.endswith(name))
        assert iou(st.mask, truth) >= 0.9, name
        assert check("shape_segment", EditState(image=img), st, s) >= 0.8


def test_the_shape_picks_between_blobs_of_one_colour():
    img = background("uniform")
    square = draw(img, "square", "red", (130, 190), 50)
    circle = draw(img, "circle", "red", (360, 190), 40)  # smaller than the square, but the one asked for
    st, _ = locate("color_segment", img, "red circle")
    assert iou(st.mask, circle) >= 0.9 and not (st.mask & square).any()


def test_grabcut_segment_follows_the_object_on_stripes():
    img, masks = scene("stripes")
    st, s = locate("grabcut_segment", img, "blue square")
    assert iou(st.mask, masks["blue square"]) >= 0.9
    st, s = locate("grabcut_segment", img, "star")  # no colour: seeded by the shape estimate
    assert iou(st.mask, masks["purple star"]) >= 0.85


def test_achromatic_targets_are_found_by_colour():
    img = background("uniform", light=False)
    white = draw(img, "circle", "white", (150, 190), 50)
    gray = draw(img, "square", "gray", (370, 190), 45)
    assert iou(locate("color_segment", img, "white circle")[0].mask, white) >= 0.9
    assert iou(locate("color_segment", img, "gray square")[0].mask, gray) >= 0.9
    light = background("uniform")
    black = draw(light, "triangle", "black", (250, 190), 60)
    assert iou(locate("color_segment", light, "black triangle")[0].mask, black) >= 0.9


def test_locate_check_prefers_the_right_blob():
    img, masks = scene("uniform")
    s = Subtask("s1", "recolor", target("red circle"), {"color": "pink"})
    good = EditState(image=img, mask=masks["red circle"])
    wrong = EditState(image=img, mask=masks["blue square"])
    box = np.zeros_like(masks["red circle"])
    box[60:180, 70:190] = True  # a loose box around the circle
    q = [Q.check_locate(EditState(image=img), st, s) for st in (good, wrong, EditState(image=img, mask=box))]
    assert q[0] >= 0.85 and q[1] < 0.2 and q[2] < q[0]
    assert Q.check_locate(EditState(image=img), EditState(image=img, mask=np.ones_like(box)), s) == 0.0


def test_nothing_matching_is_an_edit_error_that_says_what():
    img, _ = scene("uniform")
    with pytest.raises(EditError, match="no orange pixels found for 'orange circle'"):
        locate("color_segment", img, "orange circle")
    with pytest.raises(EditError, match="names no colour"):
        locate("color_segment", img, "circle")
    with pytest.raises(EditError, match="unknown colour 'mauve'"):
        TOOLS["color_segment"].fn(EditState(image=img),
                                  Subtask("s1", "recolor", Target("mauve circle", "mauve", "circle")))
    with pytest.raises(EditError, match="stands out"):
        locate("shape_segment", background("stripes"), "star")


def shaded_object(w: int = 160, h: int = 120):
    """A red ellipse lit on the left and in shadow on the right (RGB scaled 1.0 → 0.3: named red, then brown,
    then black, the hue staying 28–35°) on a tan, wood-like background of another hue (~60°)."""
    img = np.empty((h, w, 3), np.uint8)
    img[:] = (196, 140, 96)
    truth = np.zeros((h, w), np.uint8)
    cv2.ellipse(truth, (w // 2, h // 2), (55, 35), 0, 0, 360, 1, -1)
    truth = truth.astype(bool)
    ramp = np.interp(np.arange(w, dtype=np.float32), [w // 2 - 55, w // 2 + 55], [1.0, 0.3])
    obj = np.broadcast_to(np.array(COLORS["red"], np.float32) * ramp[:, None], (h, w, 3))
    img[truth] = np.clip(obj[truth], 0, 255).astype(np.uint8)
    return img, truth


def test_hue_segment_keeps_the_shaded_part_that_color_segment_loses():
    img, truth = shaded_object()
    hue, s = locate("hue_segment", img, "red cup")
    named, _ = locate("color_segment", img, "red cup")
    assert iou(hue.mask, truth) >= 0.95
    assert iou(named.mask, truth) < 0.7  # the shadowed side is named brown and black
    start = EditState(image=img)
    assert check("hue_segment", start, hue, s) >= 0.8 > check("color_segment", start, named, s)


def test_hue_segment_needs_a_colour_with_a_hue():
    img, _ = scene("uniform")
    for name in ("black triangle", "white circle", "gray square"):
        with pytest.raises(EditError, match="has no hue.*use color_segment"):
            locate("hue_segment", img, name)
    with pytest.raises(EditError, match="names no colour"):
        locate("hue_segment", img, "circle")


def test_locate_check_penalises_a_mask_that_stops_inside_the_object():
    img, truth = shaded_object()
    s = Subtask("s1", "recolor", target("red cup"), {"color": "blue"})  # no shape: only colour and completeness
    half = truth.copy()
    half[:, img.shape[1] // 2:] = False  # cut through the shading: the object goes on past its right edge
    L = F.lab(img)
    assert Q.continuation(L, truth, "red") < 0.02 and Q.continuation(L, half, "red") > 0.2
    start = EditState(image=img)
    assert Q.check_locate(start, EditState(image=img, mask=truth), s) >= 0.9
    assert Q.check_locate(start, EditState(image=img, mask=half), s) < 0.5


# ---- recolor ------------------------------------------------------------------------------------------

def shaded_scene():
    """A red circle with a brightness ramp across it (shading to keep) on a gradient."""
    img = background("gradient")
    mask = draw(img, "circle", "red", (256, 192), 80)
    ramp = np.linspace(0.85, 1.1, W, dtype=np.float32)[None, :, None]
    shaded = np.clip(img * ramp, 0, 255).astype(np.uint8)
    img[mask] = shaded[mask]
    return img, mask


@pytest.mark.parametrize("tool", ["recolor_hsv", "recolor_lab"])
@pytest.mark.parametrize("color", ["pink", "white", "cyan"])
def test_recolor_makes_the_object_the_colour_and_nothing_else(tool, color):
    img, truth = shaded_scene()
    located, s = locate("color_segment", img, "red circle", color=color)
    after = TOOLS[tool].fn(located, s)
    core = Q.erode(truth, 2)
    assert F.named_share(after.image[core], color) >= 0.95
    assert (after.image[~located.mask] == img[~located.mask]).all()
    assert Q.texture_kept(img, after.image, truth) >= 0.8  # the ramp survives
    assert check(tool, located, after, s) >= 0.9
    assert (located.image == img).all()  # the located state is not changed by the recolor


def test_recolor_check_scores_the_wrong_colour_or_nothing_done_low():
    img, _ = shaded_scene()
    located, s = locate("color_segment", img, "red circle", color="pink")
    good = TOOLS["recolor_hsv"].fn(located, s)
    wrong = TOOLS["recolor_hsv"].fn(located, Subtask("s1", "recolor", s.target, {"color": "orange"}))
    flat = located.evolve(image=np.where(located.mask[..., None], np.uint8(COLORS["pink"]), img).astype(np.uint8))
    spill = good.evolve(image=np.where(located.mask[..., None], good.image, np.uint8(COLORS["pink"])).astype(np.uint8))
    q = {name: Q.check_recolor(located, st, s) for name, st in
         {"good": good, "wrong": wrong, "undone": located, "flat": flat, "spill": spill}.items()}
    assert q["good"] >= 0.9
    assert q["wrong"] < 0.1 and q["undone"] < 0.1 and q["spill"] < 0.1
    assert q["flat"] < q["good"]  # the shading is gone


def test_recolor_needs_a_mask_and_a_known_colour():
    img, _ = shaded_scene()
    with pytest.raises(EditError, match="no mask"):
        TOOLS["recolor_hsv"].fn(EditState(image=img), Subtask("s1", "recolor", target("red circle"), {"color": "pink"}))
    located, _ = locate("color_segment", img, "red circle")
    with pytest.raises(EditError, match="unknown target colour .*'mauve'"):
        TOOLS["recolor_lab"].fn(located, Subtask("s1", "recolor", target("red circle"), {"color": "mauve"}))


# ---- fill ---------------------------------------------------------------------------------------------

def removal(kind: str):
    clean = background(kind)
    img = clean.copy()
    truth = draw(img, "circle", "red", (200, 180), 50)
    return clean, img, truth


@pytest.mark.parametrize("kind", ["uniform", "gradient", "noise", "stripes"])
@pytest.mark.parametrize("tool", ["inpaint_telea", "inpaint_ns", "fill_surround", "fill_offset_copy"])
def test_fill_removes_the_object_and_restores_the_background(kind, tool):
    clean, img, truth = removal(kind)
    located, s = locate("color_segment", img, "red circle", kind="remove")
    after = TOOLS[tool].fn(located, s)
    region = Q.dilate(truth, 3)
    blur = (0, 0), 8.0 if kind == "stripes" else 2.0  # compare at the texture's scale
    de = F.delta_e_lab(F.lab(cv2.GaussianBlur(after.image, *blur)), F.lab(cv2.GaussianBlur(clean, *blur)))[region]
    assert np.median(de) <= 8 and np.percentile(de, 90) <= 20
    assert F.named_share(after.image[truth], "red") <= 0.02
    assert (after.image[~Q.dilate(truth, 6)] == img[~Q.dilate(truth, 6)]).all()
    assert check(tool, located, after, s) >= 0.8


def test_offset_copy_keeps_stripes_that_smooth_fills_blur():
    clean, img, truth = removal("stripes")
    located, s = locate("color_segment", img, "red circle", kind="remove")
    copied, smooth = TOOLS["fill_offset_copy"].fn(located, s), TOOLS["fill_surround"].fn(located, s)
    inner = Q.erode(truth, 4)
    err = {n: float(np.median(F.delta_e_lab(F.lab(st.image), F.lab(clean))[inner])) for n, st in
           (("copy", copied), ("smooth", smooth))}
    assert err["copy"] <= 3 < err["smooth"]
    assert check("fill_offset_copy", located, copied, s) > check("fill_surround", located, smooth, s)


def test_fill_check_scores_an_undone_or_wrong_fill_low():
    clean, img, truth = removal("uniform")
    located, s = locate("color_segment", img, "red circle", kind="remove")
    good = TOOLS["inpaint_telea"].fn(located, s)
    blackened = located.evolve(image=np.where(Q.dilate(located.mask, 2)[..., None], np.uint8(20), img).astype(np.uint8))
    q = [Q.check_fill(located, st, s) for st in (good, located, blackened)]
    assert q[0] >= 0.85 and q[1] < 0.05 and q[2] < 0.05


def test_fill_without_a_region_is_an_edit_error():
    img, _ = scene()
    for tool in ("inpaint_telea", "inpaint_ns", "fill_surround", "fill_offset_copy"):
        with pytest.raises(EditError, match="nothing to fill"):
            TOOLS[tool].fn(EditState(image=img), Subtask("s1", "remove", target("red circle")))


# ---- replace ------------------------------------------------------------------------------------------

def test_replace_draws_the_new_shape_in_the_old_box():
    img, masks = scene("gradient")
    s = Subtask("s1", "replace", target("red circle"), {"color": "blue", "shape": "star"})
    located = TOOLS["color_segment"].fn(EditState(image=img), s)
    filled = TOOLS["inpaint_telea"].fn(located, s)
    after = TOOLS["draw_shape"].fn(filled, s)
    blue = F.color_mask(after.image, "blue") & Q.dilate(masks["red circle"], 4)
    assert F.classify_shape(blue) == "star"
    assert F.named_share(after.image[masks["red circle"]], "red") < 0.02
    ys, xs = np.nonzero(blue)
    assert abs(xs.mean() - 130) < 6 and abs(ys.mean() - 122) < 8  # centred where the circle was
    good = check("draw_shape", filled, after, s)
    wrong = TOOLS["draw_shape"].fn(filled, Subtask("s1", "replace", s.target, {"color": "blue", "shape": "square"}))
    assert good >= 0.85 and check("draw_shape", filled, wrong, s) < 0.5
    assert check("draw_shape", filled, filled, s) == 0.0
    with pytest.raises(EditError, match="unknown shape 'blob'"):
        TOOLS["draw_shape"].fn(filled, Subtask("s1", "replace", s.target, {"color": "blue", "shape": "blob"}))


# ---- text ---------------------------------------------------------------------------------------------

def text_scene(kind: str = "uniform"):
    img = background(kind)
    draw(img, "circle", "red", (420, 300), 45)
    img = write(img, "SALE", (60, 60), 44)
    img = write(img, "WELCOME", (60, 250), 30)
    return img


@pytest.fixture(scope="module")
def rapid():
    why = T.rapid_reason()
    if why:
        pytest.skip(why)
    return TOOLS["ocr_rapid"]


def _ocr_boxes(img, tool):
    return TOOLS[tool].fn(EditState(image=img), Subtask("s1", "text_remove", None, {})).text_boxes


def test_ocr_rapid_reads_sale(rapid):
    img = text_scene("noise")
    boxes = _ocr_boxes(img, "ocr_rapid")
    assert sorted(b[4] for b in boxes) == ["SALE", "WELCOME"]
    sale = next(b for b in boxes if b[4] == "SALE")
    left, t, r, b = T.font(44).getbbox("SALE")  # the font's box; the ink box found is inside it by its bearings
    assert abs(sale[0] - (60 + left)) <= 4 and abs(sale[1] - (60 + t)) <= 3 and abs(sale[2] - (60 + r)) <= 4


def test_ocr_tesseract_reads_sale():
    why = T.tesseract_reason()
    if why:
        pytest.skip(why)
    assert sorted(b[4] for b in _ocr_boxes(text_scene("stripes"), "ocr_tesseract")) == ["SALE", "WELCOME"]


def test_text_mser_finds_lines_and_picks_the_named_one_by_shape():
    img = text_scene("checker")
    assert len(T.text_lines(img)) == 2  # the circle is not text
    s = Subtask("s1", "text_remove", None, {"text": "sale"})
    st = TOOLS["text_mser"].fn(EditState(image=img), s)
    assert len(st.text_boxes) == 1 and st.text_boxes[0][4] == ""
    left, t, r, b = T.font(44).getbbox("SALE")
    assert np.allclose(st.text_boxes[0][:4], (60 + left, 60 + t, 60 + r, 60 + b), atol=4)
    assert check("text_mser", EditState(image=img), st, s) >= 0.8
    twins = write(write(background("uniform"), "WINTER", (40, 60), 30), "MARKET", (40, 250), 30)
    with pytest.raises(EditError, match="needs OCR"):
        TOOLS["text_mser"].fn(EditState(image=twins), Subtask("s1", "text_remove", None, {"text": "PARKING"}))


def _remove_sale(find: str, fill: str = "inpaint_telea"):
    img = text_scene("gradient")
    s = Subtask("s1", "text_remove", None, {"text": "Sale!"})  # case and punctuation are ignored
    found = TOOLS[find].fn(EditState(image=img), s)
    return img, s, found, TOOLS[fill].fn(found, s)


@pytest.mark.parametrize("find", ["ocr_rapid", "ocr_tesseract", "text_mser"])
def test_text_remove_erases_only_the_named_text(find):
    why = TOOLS[find].available()
    if why:
        pytest.skip(why)
    img, s, found, after = _remove_sale(find)
    sale_ink = Q.ink_mask(img, background("gradient")) & (np.arange(H)[:, None] < 140)
    welcome = np.zeros((H, W), bool)
    welcome[240:300, 50:300] = True
    assert Q.ink_mask(after.image, background("gradient"))[sale_ink].mean() <= 0.05
    assert (after.image[welcome] == img[welcome]).all()
    assert check(find, EditState(image=img), found, s) >= 0.8
    assert Q.check_fill(found, after, s) >= 0.8 > Q.check_fill(found, found, s)


def test_text_replace_writes_the_new_text_where_the_old_was(rapid):
    img = text_scene("uniform")
    s = Subtask("s1", "text_replace", None, {"old": "WELCOME", "text": "HI"})
    found = rapid.fn(EditState(image=img), s)
    filled = TOOLS["fill_surround"].fn(found, s)
    after = TOOLS["write_text"].fn(filled, s)
    read = {b[4]: b for b in _ocr_boxes(after.image, "ocr_rapid")}
    assert set(read) == {"SALE", "HI"}
    old, new = found.text_boxes[0], read["HI"]
    assert abs(new[0] - old[0]) <= 3 and abs(new[3] - old[3]) <= 3  # same left edge, same line
    assert check("write_text", filled, after, s) >= 0.85
    cv2_after = TOOLS["write_text_cv2"].fn(filled, s)
    assert Q.ink_mask(cv2_after.image, filled.image).sum() > 50
    # writing the old text again (or nothing) is not the replacement
    wrong = TOOLS["write_text"].fn(filled, Subtask("s1", "text_replace", None, {"old": "WELCOME", "text": "WELCOME"}))
    assert check("write_text", filled, wrong, s) < 0.5 and check("write_text", filled, filled, s) == 0.0


@pytest.mark.parametrize("position", ["top left", "center", "bottom right"])
@pytest.mark.parametrize("light", [True, False])
def test_text_add_writes_at_the_position_in_a_contrasting_colour(position, light):
    img = background("noise", light)
    s = Subtask("s1", "text_add", None, {"text": "OPEN", "position": position})
    for tool in ("write_text", "write_text_cv2"):
        after = TOOLS[tool].fn(EditState(image=img), s)
        ink = Q.ink_mask(after.image, img)
        ys, xs = np.nonzero(ink)
        col, row = {"top left": (0, 0), "center": (1, 1), "bottom right": (2, 2)}[position]
        assert col * W / 3 <= xs.mean() < (col + 1) * W / 3 and row * H / 3 <= ys.mean() < (row + 1) * H / 3
        assert (after.image[ink].mean() < 80) == light  # black on light, white on dark
        assert check(tool, EditState(image=img), after, s) >= 0.8
    elsewhere = Subtask("s1", "text_add", None,
                        {"text": "OPEN", "position": "top right" if position != "top right" else "left"})
    assert Q.check_write(EditState(image=img), TOOLS["write_text"].fn(EditState(image=img), elsewhere), s) == 0.0


def test_write_rejects_bad_parameters():
    img = background("uniform")
    with pytest.raises(EditError, match="position"):
        TOOLS["write_text"].fn(EditState(image=img),
                               Subtask("s1", "text_add", None, {"text": "OPEN", "position": "up"}))
    with pytest.raises(EditError, match="params\\['text'\\]"):
        TOOLS["write_text"].fn(EditState(image=img), Subtask("s1", "text_add", None, {"position": "top"}))
    with pytest.raises(EditError, match="unknown colour 'mauve'"):
        TOOLS["write_text"].fn(EditState(image=img), Subtask("s1", "text_add", None,
                                                             {"text": "A", "position": "top", "color": "mauve"}))
    with pytest.raises(EditError, match="no box of the text"):
        TOOLS["write_text"].fn(EditState(image=img), Subtask("s1", "text_replace", None, {"old": "A", "text": "B"}))


def test_ocr_output_is_untrusted():
    lines, bad = T.parse_rapid([[[[1, 2], [9, 2], [9, 8], [1, 8]], "OK", 0.9], ["garbage"], [[[1, 2]], 3, 0.5],
                                [[[0, 0], [float("nan"), 1], [2, 2], [0, 2]], "X", 0.5]])
    assert lines == [((1, 2, 9, 8), "OK")] and bad == 3
    assert T.parse_rapid(None) == ([], 0)
    tsv = ("level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
           "5\t1\t1\t1\t1\t1\t10\t10\t40\t20\t95\tSALE\n5\t1\t2\t1\t1\t1\t56\t11\t30\t20\t90\tNOW\n"
           "5\t1\t3\t1\t1\t1\t10\t200\tx\t20\t90\tBAD\n5\t1\t4\t1\t1\t1\t10\t300\t20\t20\t10\tLOW\n")
    assert T.parse_tesseract_tsv(tsv) == [((10, 10, 86, 31), "SALE NOW")]
    assert T.parse_tesseract_tsv("not a table") == []
    assert T.text_similarity("Sale!", "SALE") == 1.0 and T.text_similarity("SA1E", "SALE") >= 0.7
    assert T.text_similarity("OPEN", "SALE") < 0.7


# ---- background and foreground ----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["uniform", "stripes", "checker"])
def test_foreground_and_background_change(kind):
    img, masks = scene(kind)
    objects = np.any(list(masks.values()), axis=0)
    s = Subtask("s1", "background", None, {"color": "yellow"})
    for fg_tool in ("border_key_foreground", "grabcut_foreground"):
        fg = TOOLS[fg_tool].fn(EditState(image=img), s)
        assert iou(fg.mask, objects) >= 0.9, fg_tool
        assert check(fg_tool, EditState(image=img), fg, s) >= 0.8
    for bg_tool in ("set_background", "set_background_feathered"):
        after = TOOLS[bg_tool].fn(fg, s)
        outside = ~Q.dilate(objects, 3)
        assert F.named_share(after.image[outside], "yellow") >= 0.99
        assert F.named_share(after.image[Q.erode(masks["red circle"], 2)], "red") >= 0.99
        assert check(bg_tool, fg, after, s) >= 0.9
    assert Q.check_background(fg, fg, s) < 0.1  # nothing done
    half = fg.evolve(mask=np.zeros_like(fg.mask))
    assert Q.check_foreground(EditState(image=img), half, s) == 0.0
    whole_box = np.zeros_like(objects)
    whole_box[20:-20, 20:-20] = True  # a box, not the objects
    assert Q.check_foreground(EditState(image=img), fg.evolve(mask=whole_box), s) < 0.3


def test_foreground_of_a_plain_image_is_an_edit_error():
    with pytest.raises(EditError, match="no foreground"):
        TOOLS["border_key_foreground"].fn(EditState(image=background("stripes")), Subtask("s1", "background"))


# ---- upscale ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tool", ["upscale_cubic", "upscale_lanczos", "upscale_lanczos_sharpen"])
def test_upscale_scales_by_the_factor(tool):
    img = text_scene("noise")
    for factor, size in ((2, (2 * H, 2 * W)), (1.5, (576, 768))):
        s = Subtask("s1", "upscale", None, {"factor": factor})
        after = TOOLS[tool].fn(EditState(image=img), s)
        assert after.image.shape == (*size, 3) and after.mask is None
        assert check(tool, EditState(image=img), after, s) >= 0.85
    s = Subtask("s1", "upscale", None, {"factor": 2})
    good = TOOLS[tool].fn(EditState(image=img), s)
    blurred = good.evolve(image=cv2.GaussianBlur(good.image, (0, 0), 3))
    small = EditState(image=cv2.resize(img, (W * 3 // 2, H * 3 // 2)))
    assert Q.check_upscale(EditState(image=img), blurred, s) < check(tool, EditState(image=img), good, s)
    assert Q.check_upscale(EditState(image=img), small, s) == 0.0


@pytest.mark.parametrize("factor", [5, 1, 0.5, "2", True, float("nan"), None])
def test_a_bad_factor_is_an_edit_error_naming_it(factor):
    with pytest.raises(EditError, match="factor"):
        TOOLS["upscale_cubic"].fn(EditState(image=background("uniform")),
                                  Subtask("s1", "upscale", None, {"factor": factor}))


# ---- every tool -------------------------------------------------------------------------------------------

SUBTASKS = {
    "recolor": Subtask("s1", "recolor", target("red circle"), {"color": "pink"}),
    "remove": Subtask("s1", "remove", target("red circle")),
    "replace": Subtask("s1", "replace", target("red circle"), {"color": "blue", "shape": "star"}),
    "text_remove": Subtask("s1", "text_remove", None, {"text": "SALE"}),
    "text_replace": Subtask("s1", "text_replace", None, {"old": "SALE", "text": "HI"}),
    "text_add": Subtask("s1", "text_add", None, {"text": "HI", "position": "top"}),
    "background": Subtask("s1", "background", None, {"color": "white"}),
    "upscale": Subtask("s1", "upscale", None, {"factor": 2}),
}


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_every_tool_raises_only_edit_errors_when_there_is_nothing_to_find(name):
    tool = TOOLS[name]
    plain = background("gradient")
    for kind in tool.kinds:
        state = EditState(image=plain.copy())
        try:
            out = tool.fn(state, SUBTASKS[kind])
        except EditError as err:
            assert str(err)
        else:
            assert isinstance(out, EditState) and out.image.dtype == np.uint8
        assert (state.image == plain).all() and state.mask is None
        for bad in (np.zeros((0, 0, 3), np.uint8), np.zeros((8, 8), np.uint8), np.zeros((8, 8, 3), np.float32)):
            with pytest.raises(EditError):
                tool.fn(EditState(image=bad), SUBTASKS[kind])


def test_every_usable_tool_runs_its_stage_and_check():
    """Each OpenCV tool through run_step on a scene it can edit: a state, a quality in [0, 1], no error."""
    img = write(scene("uniform")[0], "SALE", (200, 10), 40)
    for kind, s in SUBTASKS.items():
        for stage in STAGES[kind]:
            tools = [t for t in TOOLS.values() if kind in t.kinds and t.stage == stage and t.available() is None]
            assert tools, (kind, stage)
            outs = [run_step(t, EditState(image=img), s) if stage == STAGES[kind][0] else None for t in tools]
            if stage != STAGES[kind][0]:
                break  # later stages are run in the tests above, on their predecessors' output
            for t, out in zip(tools, outs):
                assert out.error is None and 0.0 <= out.quality <= 1.0, (t.name, out.error)


# ---- features ------------------------------------------------------------------------------------------------

def test_image_features():
    img, masks = scene("uniform")
    f = P.image_features(img, SUBTASKS["recolor"])
    assert set(f) == set(P.FEATURES) and all(isinstance(v, float) for v in f.values())
    assert f["target_area"] == pytest.approx(masks["red circle"].mean(), rel=0.15)
    assert f["target_components"] == 1 and f["touches_border"] == 0 and f["image_pixels"] == W * H
    assert f["background_uniformity"] > 0.95 and f["crowding"] < 0.05
    assert P.image_features(img, Subtask("s1", "recolor", target("orange circle")))["target_area"] == 0.0
    striped = P.image_features(scene("stripes")[0], SUBTASKS["recolor"])
    assert striped["background_uniformity"] < f["background_uniformity"]
    assert striped["background_texture"] > f["background_texture"]
    edge = background("uniform")
    draw(edge, "circle", "red", (10, 190), 50)
    assert P.image_features(edge, SUBTASKS["recolor"])["touches_border"] == 1.0
    t = P.image_features(text_scene(), SUBTASKS["text_remove"])
    assert 20 <= t["text_height"] <= 34  # the two lines are 32 and 22 px tall
    assert P.image_features(img, SUBTASKS["text_remove"])["text_height"] == 0.0
    with pytest.raises(EditError, match="H×W×3 uint8"):
        P.image_features(np.zeros((0, 0, 3), np.uint8), SUBTASKS["recolor"])


def test_shape_scores_classify_drawn_shapes():
    for shape in ("circle", "ellipse", "square", "rectangle", "triangle", "star"):
        for box in ((100, 100, 200, 200), (100, 100, 260, 200), (50, 50, 80, 75)):
            m = F.shape_coverage(shape, F.shape_box(shape, box), (H, W)) > 0.5
            assert F.classify_shape(m) == shape, (shape, box)

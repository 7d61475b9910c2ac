"""The learned edit tools (OWL-ViT, SAM, diffusion inpainting) on tiny random models built here: no weights
are downloaded or needed. Random weights give random answers, so the tests pin what does not depend on them:
shapes, pixel conventions, unchanged pixels outside the fill, and the errors a user sees."""

import string

import numpy as np
import pytest

pytest.importorskip("transformers")

from toolpath.tools.image import learned
from toolpath.tools.image.edit_base import COLORS, EditError, EditState, Subtask, Target, edit_tools

BLUE = COLORS["blue"]
H, W = 36, 60  # non-square, and sizes whose patch edges fall on half pixels (see the detector test)


def clip_tokenizer():
    """A character-level CLIP tokenizer: every letter is a token, with and without the end-of-word mark."""
    from transformers import CLIPTokenizer

    chars = list(string.ascii_lowercase + string.digits + ".,'!?-")
    vocab = {}
    for token in ["<|startoftext|>", "<|endoftext|>", *chars, *(c + "</w>" for c in chars)]:
        vocab[token] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[])


def scene() -> np.ndarray:
    img = np.full((H, W, 3), 235, np.uint8)
    img[8:20, 30:45] = BLUE  # rows 8..19, columns 30..44
    return img


def remove_blue() -> Subtask:
    return Subtask("s1", "remove", Target("blue square", color="blue", shape="square"))


@pytest.fixture(scope="module")
def owl_folders(tmp_path_factory):
    """OWL-ViT and OWLv2, each 4×4 patches on a 32-pixel input. The box head's last layer is zeroed, so every
    patch predicts exactly its grid prior: a box one patch wide, centred at ((col+1)/4, (row+1)/4)."""
    import torch
    from transformers import (
        Owlv2Config,
        Owlv2ForObjectDetection,
        Owlv2ImageProcessorPil,
        Owlv2Processor,
        OwlViTConfig,
        OwlViTForObjectDetection,
        OwlViTImageProcessorPil,
        OwlViTProcessor,
    )

    tok = clip_tokenizer()
    text = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=2,
                max_position_embeddings=32, bos_token_id=0, eos_token_id=1, pad_token_id=1)
    vision = dict(hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=2, image_size=32,
                  patch_size=8)
    folders = {}
    torch.manual_seed(0)
    for name, Config, Model, Proc, ImProc in [
            ("owlvit", OwlViTConfig, OwlViTForObjectDetection, OwlViTProcessor, OwlViTImageProcessorPil),
            ("owlv2", Owlv2Config, Owlv2ForObjectDetection, Owlv2Processor, Owlv2ImageProcessorPil)]:
        model = Model(Config(text_config=text, vision_config=vision, projection_dim=32))
        with torch.no_grad():
            model.box_head.dense2.weight.zero_()
            model.box_head.dense2.bias.zero_()
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        Proc(image_processor=ImProc(size={"height": 32, "width": 32}), tokenizer=tok).save_pretrained(folder)
        folders[name] = str(folder)
    return folders


@pytest.fixture(scope="module")
def sam_folder(tmp_path_factory):
    import torch
    from transformers import (
        SamConfig,
        SamImageProcessorPil,
        SamMaskDecoderConfig,
        SamModel,
        SamProcessor,
        SamPromptEncoderConfig,
        SamVisionConfig,
    )

    torch.manual_seed(0)
    cfg = SamConfig(
        vision_config=SamVisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=2,
                                      image_size=64, patch_size=16, output_channels=16, window_size=2,
                                      global_attn_indexes=[1], mlp_dim=37, num_pos_feats=8),
        prompt_encoder_config=SamPromptEncoderConfig(hidden_size=16, image_size=64, patch_size=16,
                                                     mask_input_channels=4),
        mask_decoder_config=SamMaskDecoderConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, mlp_dim=32,
                                                 iou_head_hidden_dim=16))
    folder = tmp_path_factory.mktemp("sam")
    SamModel(cfg).save_pretrained(folder)
    SamProcessor(image_processor=SamImageProcessorPil(
        size={"longest_edge": 64}, pad_size={"height": 64, "width": 64}, mask_size={"longest_edge": 16},
        mask_pad_size={"height": 16, "width": 16})).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def inpaint_folder(tmp_path_factory):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionInpaintPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    tok = clip_tokenizer()
    tok.model_max_length = 32
    unet = UNet2DConditionModel(
        block_out_channels=(16, 32), layers_per_block=1, sample_size=16, in_channels=9, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=16, attention_head_dim=4, norm_num_groups=8)
    vae = AutoencoderKL(block_out_channels=[16, 32], in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                        norm_num_groups=8, sample_size=32)
    text_encoder = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=37, num_attention_heads=2, num_hidden_layers=1,
        max_position_embeddings=32, bos_token_id=0, eos_token_id=1, pad_token_id=1))
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False, steps_offset=1)
    folder = tmp_path_factory.mktemp("sd-inpaint")
    StableDiffusionInpaintPipeline(unet=unet, vae=vae, text_encoder=text_encoder, tokenizer=tok, scheduler=scheduler,
                                   safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False).save_pretrained(folder)
    return str(folder)


# ---- offered or not --------------------------------------------------------------------------------------

ENVS = {"owlvit_detect": learned.DETECTOR_ENV, "sam_segment": learned.SAM_ENV, "diffusion_inpaint": learned.INPAINT_ENV}


def test_without_weights_the_tools_are_not_offered_and_say_what_to_set(monkeypatch, tmp_path):
    tools = edit_tools()
    for name, env in ENVS.items():
        monkeypatch.delenv(env, raising=False)
        assert f"set {env} to a local" in tools[name].available()
        with pytest.raises(EditError, match=f"set {env}"):
            tools[name].fn(EditState(scene(), mask=np.ones((H, W), bool)), remove_blue())
        missing = tmp_path / "no-such-model"
        monkeypatch.setenv(env, str(missing))
        assert tools[name].available() == f"{env} points at {missing}, which is not a folder"
        with pytest.raises(EditError, match="which is not a folder"):
            tools[name].fn(EditState(scene(), mask=np.ones((H, W), bool)), remove_blue())


def test_a_folder_without_a_loadable_model_is_an_error_naming_it(monkeypatch, tmp_path):
    tools = edit_tools()
    for name, env in ENVS.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / ("model_index.json" if name == "diffusion_inpaint" else "config.json")).write_text("{not json")
        monkeypatch.setenv(env, str(folder))
        assert tools[name].available() is None  # it exists; whether it loads is known only when it is loaded
        with pytest.raises(EditError, match=f"cannot load .* from {folder}: "):
            tools[name].fn(EditState(scene(), mask=np.ones((H, W), bool)), remove_blue())
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(learned.SAM_ENV, str(empty))
    with pytest.raises(EditError, match=f"cannot load a SAM model from {empty}"):
        tools["sam_segment"].fn(EditState(scene()), remove_blue())


# ---- detection -------------------------------------------------------------------------------------------

def test_box_fractions_become_pixels_of_the_original_image():
    logits = np.array([[-2.0, 1.0], [3.0, -5.0], [0.0, 0.0], [9.0, 9.0]])  # 4 boxes × 2 queries
    boxes = np.array([[0.5, 0.5, 0.2, 0.4], [0.1, 0.1, 0.1, 0.1], [0.95, 0.5, 0.3, 0.2], [0.5, 0.5, 0.0, 0.5]])
    out = learned.boxes_in_pixels(logits, boxes, width=200, height=100, padded_square=False)
    # best first; the zero-width box is dropped; the box over the right edge is clipped to it
    assert [b for _, b in out] == [(10, 5, 30, 15), (80, 30, 120, 70), (160, 40, 200, 60)]
    assert [round(s, 4) for s, _ in out] == [round(1 / (1 + np.exp(-3.0)), 4), round(1 / (1 + np.exp(-1.0)), 4), 0.5]
    # OWLv2: fractions of the image padded to a 200×200 square at the bottom and right
    padded = learned.boxes_in_pixels(logits, boxes, width=200, height=100, padded_square=True)
    assert [b for _, b in padded] == [(10, 10, 30, 30), (80, 60, 120, 100), (160, 80, 200, 100)]  # clipped at y=100
    below = learned.boxes_in_pixels(np.zeros((1, 1)), np.array([[0.5, 0.75, 0.2, 0.2]]), 200, 100, padded_square=True)
    assert below == []  # rows 130..170 of the padded square: all padding


@pytest.mark.parametrize("bad", [
    (np.zeros((4, 1)), np.zeros((3, 4))), (np.zeros(4), np.zeros((4, 4))),
    (np.array([[np.nan]]), np.zeros((1, 4))), (np.zeros((1, 1)), np.array([[0.5, 0.5, np.inf, 0.1]]))])
def test_garbled_detector_output_is_an_error(bad):
    with pytest.raises(EditError, match="detector output"):
        learned.boxes_in_pixels(*bad, width=10, height=10, padded_square=False)


def grid_boxes(side_x: float, side_y: float, w: int, h: int) -> set:
    """The 4×4 grid priors of the zeroed box head, in pixels: centres at k/4, one quarter wide."""
    import math

    out = set()
    for i in range(1, 5):
        for j in range(1, 5):
            x0, x1 = max(0, (j / 4 - 1 / 8) * side_x), min(w, (j / 4 + 1 / 8) * side_x)
            y0, y1 = max(0, (i / 4 - 1 / 8) * side_y), min(h, (i / 4 + 1 / 8) * side_y)
            if x1 > x0 and y1 > y0:
                out.add((math.floor(x0), math.floor(y0), math.ceil(x1), math.ceil(y1)))
    return out


@pytest.mark.parametrize("kind", ["owlvit", "owlv2"])
def test_detections_are_in_pixels_of_the_original_image(owl_folders, kind):
    hits = learned.detect(scene(), "blue square", owl_folders[kind])
    boxes = {b for _, b in hits}
    if kind == "owlvit":  # the image was stretched to the model's square: fractions of 60 wide, 36 high
        assert boxes == grid_boxes(W, H, W, H) and len(boxes) == 16
    else:  # padded to 60×60 first: fractions of 60 both ways, and the lower half of the grid is padding
        assert boxes == grid_boxes(W, W, W, H) and len(boxes) == 8
    scores = [s for s, _ in hits]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)


def test_owlvit_detect_makes_the_best_box_the_mask(owl_folders, monkeypatch):
    monkeypatch.setenv(learned.DETECTOR_ENV, owl_folders["owlvit"])
    monkeypatch.delenv(learned.SAM_ENV, raising=False)
    monkeypatch.setenv(learned.THRESHOLD_ENV, "0")  # random weights: take whatever scores best
    tool = edit_tools()["owlvit_detect"]
    assert tool.available() is None
    state = EditState(scene(), info={"earlier": 1})
    after = tool.fn(state, remove_blue())
    found = after.info["owlvit_detect"]
    assert found["query"] == "blue square" and not found["refined_by_sam"] and after.info["earlier"] == 1
    assert after.mask.shape == (H, W) and after.mask.dtype == bool and after.image is state.image
    x0, y0, x1, y1 = found["box"]
    assert after.mask.sum() == (x1 - x0) * (y1 - y0) and after.mask[y0:y1, x0:x1].all()
    best_score, best_box = learned.detect(scene(), "blue square", owl_folders["owlvit"])[0]
    assert tuple(found["box"]) == best_box and found["score"] == round(best_score, 4)
    assert 0.0 <= tool.check(state, after, remove_blue()) <= 1.0
    # loaded once for the process
    model = learned._load("detector", "x", owl_folders["owlvit"], lambda p: pytest.fail("loaded twice"))
    assert model is learned._load("detector", "x", owl_folders["owlvit"], lambda p: None)
    # nothing above the threshold is an error that names it
    monkeypatch.setenv(learned.THRESHOLD_ENV, "1")
    with pytest.raises(EditError, match=r"nothing scored above 1\.0 .*'blue square'; the best scored"):
        tool.fn(state, remove_blue())
    monkeypatch.setenv(learned.THRESHOLD_ENV, "high")
    with pytest.raises(EditError, match="TOOLPATH_DETECTOR_THRESHOLD must be a number in"):
        tool.fn(state, remove_blue())
    with pytest.raises(EditError, match="names no target"):
        tool.fn(state, Subtask("s2", "remove"))


def test_owlvit_detect_refines_its_box_with_sam_when_sam_is_set(owl_folders, sam_folder, monkeypatch):
    monkeypatch.setenv(learned.DETECTOR_ENV, owl_folders["owlvit"])
    monkeypatch.setenv(learned.SAM_ENV, sam_folder)
    monkeypatch.setenv(learned.THRESHOLD_ENV, "0")
    after = edit_tools()["owlvit_detect"].fn(EditState(scene()), remove_blue())
    assert after.mask.shape == (H, W) and after.mask.dtype == bool and after.mask.any()
    box = tuple(after.info["owlvit_detect"]["box"])
    sam_mask = learned.segment(scene(), box, sam_folder)  # SAM prompted with the detector's box
    if sam_mask.any():
        assert after.info["owlvit_detect"]["refined_by_sam"] and np.array_equal(after.mask, sam_mask)
    else:  # SAM saw nothing: the box stays the mask
        assert not after.info["owlvit_detect"]["refined_by_sam"]
        assert np.array_equal(after.mask, learned.box_mask((H, W), box))


# ---- segmentation ----------------------------------------------------------------------------------------

def test_the_colour_prompt_box_is_the_largest_region_of_that_colour():
    img = scene()
    img[30:33, 2:5] = BLUE  # a smaller blue speck elsewhere
    assert learned.color_prompt_box(img, "blue") == (30, 8, 45, 20)
    big = np.kron(img, np.ones((10, 10, 1), np.uint8))  # 360×600: estimated on a 256-wide copy
    x0, y0, x1, y1 = learned.color_prompt_box(big, "blue")
    assert abs(x0 - 300) <= 3 and abs(y0 - 80) <= 3 and abs(x1 - 450) <= 3 and abs(y1 - 200) <= 3
    with pytest.raises(EditError, match="no red region"):
        learned.color_prompt_box(img, "red")
    with pytest.raises(EditError, match="unknown colour 'teal'; known: red, "):
        learned.color_prompt_box(img, "teal")


def test_sam_masks_are_aligned_with_the_original_image(sam_folder, monkeypatch):
    mask = learned.segment(scene(), (30, 8, 45, 20), sam_folder)
    assert mask.shape == (H, W) and mask.dtype == bool
    monkeypatch.setenv(learned.SAM_ENV, sam_folder)
    tool = edit_tools()["sam_segment"]
    state = EditState(scene())
    after = tool.fn(state, remove_blue())  # the seeded tiny SAM sees something in this box
    assert after.info["sam_segment"]["prompt_box"] == [30, 8, 45, 20]
    assert np.array_equal(after.mask, learned.segment(scene(), (30, 8, 45, 20), sam_folder))
    assert after.mask.any() and 0.0 <= tool.check(state, after, remove_blue()) <= 1.0
    monkeypatch.setattr(learned, "segment", lambda image, box, path: np.zeros(image.shape[:2], bool))
    with pytest.raises(EditError, match=r"SAM found nothing in the box \[30, 8, 45, 20\]"):
        tool.fn(state, remove_blue())
    with pytest.raises(EditError, match="names no colour"):
        tool.fn(state, Subtask("s1", "remove", Target("square", shape="square")))
    with pytest.raises(EditError, match="must be H×W×3 uint8"):
        tool.fn(EditState(np.zeros((H, W), np.uint8)), remove_blue())


def test_the_locate_check_prefers_a_tight_mask_of_the_targets_colour():
    img = scene()
    tight = np.zeros((H, W), bool)
    tight[8:20, 30:45] = True
    loose = np.zeros((H, W), bool)
    loose[2:30, 20:55] = True
    check, before, sub = learned._locate_check, EditState(img), remove_blue()
    assert check(before, before.evolve(mask=tight), sub) == pytest.approx(1.0)
    assert 0.0 < check(before, before.evolve(mask=loose), sub) < 0.8
    assert check(before, before.evolve(mask=np.zeros((H, W), bool)), sub) == 0.0
    assert check(before, before.evolve(mask=np.ones((H, W), bool)), sub) == 0.0
    assert check(before, before.evolve(mask=np.ones((5, 5), bool)), sub) == 0.0  # not aligned with the image


# ---- inpainting ------------------------------------------------------------------------------------------

def test_diffusion_inpaint_changes_only_the_masked_pixels(inpaint_folder, monkeypatch):
    monkeypatch.setenv(learned.INPAINT_ENV, inpaint_folder)
    monkeypatch.setenv(learned.STEPS_ENV, "2")
    tool = edit_tools()["diffusion_inpaint"]
    assert tool.available() is None
    mask = np.zeros((H, W), bool)
    mask[8:20, 30:45] = True
    state = EditState(scene(), mask=mask)
    after = tool.fn(state, remove_blue())
    filled = learned.fill_mask(state)
    assert filled[mask].all() and filled.sum() > mask.sum()  # the mask, grown a little
    assert after.image.shape == (H, W, 3) and after.image.dtype == np.uint8
    assert np.array_equal(after.image[~filled], state.image[~filled])
    assert not np.array_equal(after.image[filled], state.image[filled])
    assert after.mask is mask and after.info["diffusion_inpaint"] == {"steps": 2, "grow_px": learned.GROW_PX}
    assert 0.0 <= tool.check(state, after, remove_blue()) <= 1.0
    # same call, same fill
    assert np.array_equal(tool.fn(state, remove_blue()).image, after.image)
    # text removal: the union of the text boxes is the mask
    text_state = EditState(scene(), text_boxes=[(2, 2, 12, 8, "hi"), (40, 25, 58, 34, "yo")])
    out = tool.fn(text_state, Subtask("s1", "text_remove"))
    boxes = learned.fill_mask(text_state)
    assert boxes[2:8, 2:12].all() and boxes[25:34, 40:58].all() and not boxes[15, 20]
    assert np.array_equal(out.image[~boxes], text_state.image[~boxes])
    with pytest.raises(EditError, match=r"text box \('a', 2, 12, 8, 'hi'\) does not start with x0"):
        learned.fill_mask(EditState(scene(), text_boxes=[("a", 2, 12, 8, "hi")]))
    with pytest.raises(EditError, match="nothing to fill"):
        tool.fn(EditState(scene()), remove_blue())
    monkeypatch.setenv(learned.STEPS_ENV, "0")
    with pytest.raises(EditError, match="TOOLPATH_INPAINT_STEPS must be an integer in"):
        tool.fn(state, remove_blue())


def test_the_fill_check_scores_a_fill_by_its_surrounding():
    img = scene()
    mask = np.zeros((H, W), bool)
    mask[8:20, 30:45] = True
    before = EditState(img, mask=mask)
    cleared = img.copy()
    cleared[learned.fill_mask(before)] = 235  # the background the ring shows
    check, sub = learned._fill_check, remove_blue()
    assert check(before, before.evolve(image=cleared), sub) == pytest.approx(1.0)
    assert check(before, before, sub) < 0.2  # the blue object is still there
    smudged = cleared.copy()
    smudged[0, 0] = 0  # a pixel outside the fill changed
    assert check(before, before.evolve(image=smudged), sub) == 0.0

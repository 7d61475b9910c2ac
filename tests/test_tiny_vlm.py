"""The tiny VLM's build (toolpath/train/): its data, the pipeline at toy scale writing a folder that plain
transformers loads and generates from, determinism by seed, and how `local:tiny-vlm` and `models list` find it.

The toy pipeline uses a tiny random language model made here (a few-hundred-token BPE vocabulary), so it runs in
seconds; the real build (`toolpath models build tiny-vlm`) is the same code with SmolLM2-135M and real sizes.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tests.conftest import toolpath_cli
from tests.tiny_lm import save_tiny_chat_lm
from toolpath.train import vlm_data as vd


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """A random 2-layer Llama with a byte-level BPE tokenizer trained on the words the data uses."""
    pytest.importorskip("torch")
    from toolpath.tools.image.edit_base import COLORS, SHAPES

    words = " ".join([*COLORS, *SHAPES, *vd.EASY_VQA_COLORS, *vd.EASY_VQA_SHAPES, "Is there a in the image yes no",
                      "What color is the shape Describe image picture briefly an and , . ?"])
    folder = tmp_path_factory.mktemp("tiny-lm")
    save_tiny_chat_lm(folder, words)
    return folder


def _build(tmp_path, lm, seed=0):
    pytest.importorskip("easy_vqa", reason="the tiny VLM trains on the easy-vqa package (pip install easy-vqa)")
    pytest.importorskip("peft", reason="LoRA on the language model needs peft")
    from toolpath.train import tiny_vlm

    return tiny_vlm.build(seed, home=tmp_path, config=tiny_vlm.toy_config(), lm_folder=lm)


# ---- data ------------------------------------------------------------------------------------------------

def test_easy_vqa_questions_reveal_colour_and_shape():
    assert vd._attributes([("what color is the shape?", "teal"), ("is there a circle?", "no"),
                           ("does the image not contain a triangle?", "no")]) == ("teal", "triangle")
    assert vd._attributes([("is there not a red shape?", "no"), ("what shape is present?", "rectangle")]) == \
        ("red", "rectangle")
    assert vd._attributes([("is no blue shape present?", "yes")]) == (None, None)


def test_scene_questions_use_real_negatives_and_captions_name_every_object():
    rng = random.Random(3)
    for _ in range(40):
        ex = vd.make_scene(rng, n_questions=8)
        assert ex.image.shape == (64, 64, 3) and ex.image.dtype == np.uint8
        for c, s in ex.objects:
            assert f"{c} {s}" in ex.caption
        for q, a in ex.qa:
            if q.startswith("Is there"):
                name = q.split(" ", 3)[3].removesuffix(" in the image?")
                *color, shape = name.split()
                present = any(s == shape and (not color or c == color[0]) for c, s in ex.objects)
                assert (a == "yes") == present, (q, a, ex.objects)
            else:
                shape = q.removeprefix("What color is the ").rstrip("?")
                assert (a, shape) in ex.objects
    assert vd.scene_caption([("orange", "star"), ("red", "circle")]) == "an orange star and a red circle"


def test_scenes_are_deterministic_and_the_held_out_ones_differ():
    a, b = vd.scenes(5, seed=7), vd.scenes(5, seed=7)
    assert all((x.image == y.image).all() and x.qa == y.qa for x, y in zip(a, b))
    held = vd.scenes(5, seed=7, heldout=True)
    assert not all((x.image == y.image).all() for x, y in zip(a, held))


def test_a_dialog_has_loss_only_on_the_answers(tiny_lm):
    from toolpath.train.llava_folder import vlm_tokenizer
    from toolpath.train.projector_training import encode_dialog

    tok = vlm_tokenizer(tiny_lm)
    ids, labels = encode_dialog(tok, [("Is there a red circle in the image?", "yes"), ("Describe the image.",
                                                                                       "a red circle.")], 4)
    assert ids.count(tok.convert_tokens_to_ids("<image>")) == 4
    kept = tok.decode([t for t in labels if t != -100])
    assert kept == "yes<|im_end|>a red circle.<|im_end|>"


# ---- the pipeline at toy scale ---------------------------------------------------------------------------

def test_the_toy_build_writes_a_folder_plain_transformers_answers_from(tmp_path, tiny_lm):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor, AutoTokenizer, CLIPModel

    report = _build(tmp_path, tiny_lm)
    folder = tmp_path / "models" / "tiny-vlm"
    assert report["folder"] == str(folder) and not list((tmp_path / "models").glob(".tiny-vlm.*"))
    saved = json.loads((folder / "tiny_vlm.json").read_text())
    assert saved["seed"] == 0 and saved["data"]["easy_vqa_train_images"] == 24
    assert {"easy_vqa_test", "easy_vqa_blank_image", "easy_vqa_majority", "scenes_heldout", "captions",
            "clip_retrieval"} <= set(saved["figures"])
    assert 0 <= saved["figures"]["easy_vqa_test"]["accuracy"] <= 1 and saved["seconds"]["total"] > 0

    model = AutoModelForImageTextToText.from_pretrained(folder)
    processor = AutoProcessor.from_pretrained(folder)
    assert type(model).__name__ == "LlavaForConditionalGeneration"
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What color is the shape?"}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n") and "<image>" in text
    image = vd.scenes(1, seed=0)[0].image
    inputs = processor(text=text, images=image, return_tensors="pt")
    assert int((inputs["input_ids"] == model.config.image_token_id).sum()) == (32 // 8) ** 2
    out = model.generate(**inputs, max_new_tokens=3, do_sample=False)
    assert out.shape[1] > inputs["input_ids"].shape[1]

    clip = CLIPModel.from_pretrained(folder / "clip")
    ctok = AutoTokenizer.from_pretrained(folder / "clip")
    ids = ctok(["a red circle"], return_tensors="pt")["input_ids"]
    assert ids[0, -1].item() == clip.config.text_config.eos_token_id  # CLIP pools at the end-of-text token
    with torch.no_grad():
        assert clip.get_text_features(input_ids=ids).pooler_output.shape == (1, clip.config.projection_dim)
    vision = dict(model.model.vision_tower.state_dict())
    assert all(torch.equal(vision[k], v) for k, v in clip.vision_model.state_dict().items())


def test_the_same_seed_gives_the_same_weights(tmp_path, tiny_lm):
    from safetensors.torch import load_file

    _build(tmp_path / "a", tiny_lm, seed=5)
    _build(tmp_path / "b", tiny_lm, seed=5)
    a = load_file(tmp_path / "a" / "models" / "tiny-vlm" / "model.safetensors")
    b = load_file(tmp_path / "b" / "models" / "tiny-vlm" / "model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    proj = [k for k in a if "multi_modal_projector" in k]
    assert proj
    _build(tmp_path / "c", tiny_lm, seed=6)
    c = load_file(tmp_path / "c" / "models" / "tiny-vlm" / "model.safetensors")
    assert any(not (a[k] == c[k]).all() for k in proj)


# ---- finding it ------------------------------------------------------------------------------------------

def test_models_list_shows_whether_it_is_built_and_how_to_build_it(home):
    from toolpath.policies.local_models import variants

    row = next(r for r in variants() if r["model"] == "local:tiny-vlm")
    assert not row["installed"] and "toolpath models build tiny-vlm" in row["install"]
    r = toolpath_cli("models", "list", home=home)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("local:tiny-vlm"))
    assert "no" in line.split() and "toolpath models build tiny-vlm" in line
    folder = home / "models" / "tiny-vlm"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    assert not next(r for r in variants() if r["model"] == "local:tiny-vlm")["installed"]  # unfinished
    (folder / "tiny_vlm.json").write_text("{}")
    assert next(r for r in variants() if r["model"] == "local:tiny-vlm")["installed"]


def test_local_tiny_vlm_when_missing_says_how_to_build_it(home):
    from toolpath.policies.base import PolicyError
    from toolpath.policies.local import load_local
    from toolpath.spec import ModelSpec

    with pytest.raises(PolicyError, match=r"local:tiny-vlm .* is not built .*`toolpath models build tiny-vlm`"):
        load_local(ModelSpec(name="local:tiny-vlm"))


def test_models_build_refuses_an_unknown_name(home):
    r = toolpath_cli("models", "build", "nope", home=home)
    assert r.returncode == 2 and "invalid choice: 'nope'" in r.stderr


def test_models_build_runs_the_build_with_the_seed_and_reports_it(home, monkeypatch, capsys):
    """The command's own part (arguments, stage lines, the summary, a missing dependency as bad input); the
    build itself is tested above at toy scale."""
    from toolpath.cli import main
    from toolpath.train import tiny_vlm

    calls = []

    def fake_build(seed):
        calls.append(seed)
        from toolpath.progress import Progress

        Progress("[1/4] data").close("…")
        return {"folder": str(home / "models" / "tiny-vlm"), "seconds": {"total": 12.0},
                "figures": {"easy_vqa_test": {"accuracy": 0.9}, "easy_vqa_blank_image": {"accuracy": 0.4}}}

    monkeypatch.setattr(tiny_vlm, "build", fake_build)
    assert main(["models", "build", "tiny-vlm", "--seed", "3"]) == 0
    out = capsys.readouterr()
    assert calls == [3] and "toolpath: [1/4] data" in out.err
    assert "easy-vqa test 0.900 (blank image 0.400); use it as model: local:tiny-vlm" in out.out
    assert main(["models", "build", "tiny-vlm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["figures"]["easy_vqa_test"]["accuracy"] == 0.9

    def missing(seed):
        raise RuntimeError("the tiny VLM trains on the easy-vqa package: pip install easy-vqa")

    monkeypatch.setattr(tiny_vlm, "build", missing)
    assert main(["models", "build", "tiny-vlm"]) == 2
    assert "models build tiny-vlm: the tiny VLM trains on the easy-vqa package" in capsys.readouterr().err

"""Hallucination-mitigated decoding (toolpath/policies/decoding): VCD's contrast checked against a hand computation on
a tiny random Llava, SHIELD's three parts each on it (shapes, determinism, hooks removed, the inherent-bias cache),
and the spec's errors. The models are built here (tiny configs, random weights), so every test takes seconds."""

from __future__ import annotations

import math
import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from toolpath.policies import decoding  # noqa: E402
from toolpath.policies.decoding import contrast, noise, reweight  # noqa: E402
from toolpath.spec import SpecError, TaskSpec  # noqa: E402

WORDS = ("a red blue green circle square triangle image the describe is there in of and user assistant "
         "yes no . : ? shape colour").split()
TEMPLATE = ("{% for m in messages %}{{ m['role'] }} : {% for c in m['content'] %}{% if c['type'] == 'image' %}<image>"
            "{% else %}{{ c['text'] }}{% endif %}{% endfor %} \n{% endfor %}{% if add_generation_prompt %}assistant :"
            "{% endif %}")


def _tokenizer(with_bos: bool):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    specials = ["<unk>", "<pad>", "<s>", "</s>", "<image>"]
    vocab = {w: i for i, w in enumerate(specials + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if with_bos:  # as CLIP's tokenizer: a start and an end token around the text
        tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>",
                                                           special_tokens=[("<s>", 2), ("</s>", 3)])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                                bos_token="<s>", eos_token="</s>",
                                                extra_special_tokens={"image_token": "<image>"})
    return fast


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory):
    """A tiny random Llava folder whose vision tower is the vision half of a tiny CLIP saved under clip/."""
    folder = tmp_path_factory.mktemp("tiny-llava")
    torch.manual_seed(0)
    tokenizer = _tokenizer(with_bos=False)
    vocab = len(tokenizer)
    vision = transformers.CLIPVisionConfig(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64,
                                           num_hidden_layers=2, num_attention_heads=2, projection_dim=16)
    text = transformers.CLIPTextConfig(vocab_size=vocab, hidden_size=24, intermediate_size=48, num_hidden_layers=2,
                                       num_attention_heads=2, max_position_embeddings=64, projection_dim=16,
                                       bos_token_id=2, eos_token_id=3, pad_token_id=1)
    clip = transformers.CLIPModel(transformers.CLIPConfig(text_config=text.to_dict(), vision_config=vision.to_dict(),
                                                          projection_dim=16))
    llama = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                                     bos_token_id=2, eos_token_id=3, pad_token_id=1)
    config = transformers.LlavaConfig(vision_config=vision.to_dict(), text_config=llama.to_dict(),
                                      image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
                                      vision_feature_layer=-1, vision_feature_select_strategy="default",
                                      projector_hidden_act="gelu")
    model = transformers.LlavaForConditionalGeneration(config)
    model.model.vision_tower.load_state_dict(clip.vision_model.state_dict())
    model.generation_config.eos_token_id = None  # random weights: let every call run its full length
    model.save_pretrained(folder)
    images = transformers.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = transformers.LlavaProcessor(image_processor=images, tokenizer=tokenizer, patch_size=8,
                                            vision_feature_select_strategy="default", num_additional_image_tokens=1,
                                            chat_template=TEMPLATE)
    processor.save_pretrained(folder)
    clip.save_pretrained(folder / "clip")
    _tokenizer(with_bos=True).save_pretrained(folder / "clip")
    return folder


@pytest.fixture(scope="module")
def vlm(vlm_dir):
    torch.set_num_threads(1)
    model = transformers.LlavaForConditionalGeneration.from_pretrained(vlm_dir).eval()
    processor = transformers.AutoProcessor.from_pretrained(vlm_dir)
    return model, processor


def _image(seed=0, size=40):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8))


def _inputs(processor, question="is there a red circle in the image ?", seed=0):
    chat = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
    text = processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    return dict(processor(text=[text], images=[_image(seed)], return_tensors="pt"))


def _generate(model, inputs, dec, **kwargs):
    kwargs = {"max_new_tokens": 6, "do_sample": False, "pad_token_id": 1, **kwargs}
    with dec.hooks(), torch.no_grad():
        return model.generate(**inputs, logits_processor=dec.logits_processor, **kwargs)


# ---- VCD -------------------------------------------------------------------------------------------------------
def test_contrast_formula_on_hand_made_logits():
    logits = torch.tensor([[2.0, 1.0, -1.0, 0.5], [0.0, 3.0, 2.9, -5.0]])
    noised = torch.tensor([[1.0, 2.0, 0.0, 0.0], [1.0, 4.0, 1.0, 0.0]])
    out = contrast.contrast(logits, noised, alpha=1.0, beta=0.1)
    # cut: log p ≥ log β + max log p, i.e. logit ≥ max − ln 10 ≈ max − 2.303
    expected = torch.tensor([[3.0, 0.0, -math.inf, 1.0], [-math.inf, 2.0, 4.8, -math.inf]])
    assert torch.allclose(out, expected)
    # a tighter cut keeps only the best token: greedy and sampling can then only pick it
    tight = contrast.contrast(logits, noised, alpha=1.0, beta=0.5)
    assert torch.isinf(tight[0, 1:]).all() and tight[0, 0] == 3.0
    probs = torch.softmax(tight, dim=-1)
    assert probs[0, 0] == 1.0
    # α weighs the contrast: (1+α)·l − α·l'
    assert torch.allclose(contrast.contrast(logits, noised, 2.0, 0.1)[0, :2], torch.tensor([4.0, -1.0]))


def _hand_vcd_scores(model, inputs, sequences, noised, alpha, beta):
    """The contrast recomputed from two full forward passes (no caches) at every generated position."""
    n = inputs["input_ids"].shape[1]
    with torch.no_grad():
        mask = torch.ones_like(sequences)
        real = model(input_ids=sequences, attention_mask=mask, pixel_values=inputs["pixel_values"]).logits
        distorted = model(input_ids=sequences, attention_mask=mask, pixel_values=noised).logits
    return [contrast.contrast(real[:, i], distorted[:, i], alpha, beta) for i in range(n - 1, sequences.shape[1] - 1)]


@pytest.mark.parametrize("sampled", [False, True])
def test_vcd_scores_equal_the_hand_computation(vlm, tmp_path, sampled):
    model, processor = vlm
    inputs = _inputs(processor)
    dec = decoding.prepare(model, processor, inputs, {"kind": "vcd", "alpha": 1.5, "beta": 0.2}, tmp_path)
    torch.manual_seed(3)
    extra = {"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0} if sampled else {}
    out = _generate(model, inputs, dec, output_scores=True, return_dict_in_generate=True, **extra)
    noised = noise.diffuse(inputs["pixel_values"], 500, seed=0)
    hand = _hand_vcd_scores(model, inputs, out.sequences, noised, 1.5, 0.2)
    assert len(out.scores) == len(hand) == 6
    for got, want in zip(out.scores, hand):
        assert torch.equal(torch.isinf(got), torch.isinf(want))
        finite = torch.isfinite(want)
        assert torch.allclose(got[finite], want[finite], atol=1e-4)
    new = out.sequences[0, inputs["input_ids"].shape[1]:]
    for step, token in enumerate(new):  # the chosen token always passed the plausibility cut
        assert torch.isfinite(out.scores[step][0, token])
    stats = dec.stats()
    assert stats["kind"] == "vcd" and stats["extra_forward_passes"] == 6 and stats["seconds"] >= 0
    assert stats["settings"]["noise_step"] == 500 and stats["settings"]["schedule"] == "sigmoid"


def test_vcd_is_deterministic_at_temperature_zero(vlm, tmp_path):
    model, processor = vlm
    runs = []
    for _ in range(2):
        inputs = _inputs(processor)
        dec = decoding.prepare(model, processor, inputs, "vcd", tmp_path)
        runs.append(_generate(model, inputs, dec, max_new_tokens=8))
    assert torch.equal(runs[0], runs[1])


def test_vcd_refuses_beam_search(vlm, tmp_path):
    model, processor = vlm
    inputs = _inputs(processor)
    dec = decoding.prepare(model, processor, inputs, "vcd", tmp_path)
    with pytest.raises(ValueError, match="beam search"):
        _generate(model, inputs, dec, num_beams=2)


def test_diffusion_noise_schedule_and_seed():
    assert noise.signal_fraction(0) > 0.9999
    mid, late = noise.signal_fraction(500), noise.signal_fraction(999)
    assert 0 < late < mid < 1
    assert noise.signal_fraction(500, "linear") < mid  # DDPM's linear ramp destroys the image sooner
    x = torch.zeros(4, 3, 64, 64)
    a, b = noise.diffuse(x, 500, seed=7), noise.diffuse(x, 500, seed=7)
    assert torch.equal(a, b) and not torch.equal(a, noise.diffuse(x, 500, seed=8))
    assert abs(a.var().item() - (1 - mid)) < 0.02  # zero image: what is left is the noise, of variance 1 − ᾱ_t
    assert noise.diffuse(x.half(), 10).dtype == torch.float16
    with pytest.raises(ValueError, match="noise_step"):
        noise.signal_fraction(1000)


def test_text_only_call_is_left_alone(vlm, tmp_path):
    model, processor = vlm
    enc = dict(processor.tokenizer("user : hello", return_tensors="pt"))
    for kind in ("vcd", "shield"):
        dec = decoding.prepare(model, processor, enc, kind, tmp_path)
        assert len(dec.logits_processor) == 0 and dec.stats()["skipped"] == "no image"
        assert dec.stats()["extra_forward_passes"] == 0


# ---- SHIELD ----------------------------------------------------------------------------------------------------
FAST = {"steps": 4, "caption_tokens": 5, "noise_images": 6}
ALONE = {part: {"kind": "shield", "parts": [part], **FAST} for part in ("statistical", "inherent", "vulnerability")}


@pytest.mark.parametrize("part", ["statistical", "inherent", "vulnerability", "all"])
def test_shield_parts_generate_deterministically(vlm, tmp_path, part):
    model, processor = vlm
    setting = ALONE.get(part, {"kind": "shield", **FAST})
    outs = []
    for _ in range(2):
        inputs = _inputs(processor)
        dec = decoding.prepare(model, processor, inputs, setting, tmp_path)
        out = _generate(model, inputs, dec)
        assert out.shape == (1, inputs["input_ids"].shape[1] + 6)
        outs.append(out)
    assert torch.equal(outs[0], outs[1])
    projector = model.model.multi_modal_projector
    assert not projector._forward_pre_hooks  # removed after the call
    stats = dec.stats()
    assert stats["kind"] == "shield"
    if part in ("statistical", "vulnerability", "all"):
        assert isinstance(stats["caption"], str) and stats["extra_forward_passes"] >= 5  # the caption's passes
    if part in ("statistical", "all"):
        assert len(stats["kept_caption_tokens"]) == 1 and stats["kept_caption_tokens"][0] >= 1
    if part in ("vulnerability", "all"):
        assert 0 <= stats["attack_steps"] <= 4
        assert stats["extra_forward_passes"] >= 5 + 6  # caption + one contrastive pass per new token
    if part == "inherent":
        assert stats["extra_forward_passes"] == 0 and "caption" not in stats


def test_shield_hooks_removed_after_an_exception(vlm, tmp_path):
    model, processor = vlm
    inputs = _inputs(processor)
    dec = decoding.prepare(model, processor, inputs, ALONE["inherent"], tmp_path)
    projector = model.model.multi_modal_projector
    with pytest.raises(RuntimeError, match="boom"):
        with dec.hooks():
            assert len(projector._forward_pre_hooks) == 1
            raise RuntimeError("boom")
    assert not projector._forward_pre_hooks


def test_shield_refuses_generate_outside_its_hooks(vlm, tmp_path):
    model, processor = vlm
    inputs = _inputs(processor)
    dec = decoding.prepare(model, processor, inputs, ALONE["inherent"], tmp_path)
    with pytest.raises(RuntimeError, match="decoding.hooks"), torch.no_grad():
        model.generate(**inputs, logits_processor=dec.logits_processor, max_new_tokens=2, pad_token_id=1)


def test_inherent_bias_is_subtracted_and_cached(vlm, tmp_path):
    from toolpath.policies.decoding import inherent

    model, processor = vlm
    inherent._MEMO.clear()
    home = tmp_path / "home"
    projector = model.model.multi_modal_projector
    setting = {**ALONE["inherent"], "bias_weight": 0.5}
    inputs = _inputs(processor)
    dec = decoding.prepare(model, processor, inputs, setting, home)
    assert dec.stats()["inherent_bias"].startswith("computed")
    assert len(list((home / "decoding").glob("inherent-bias-*.safetensors"))) == 1
    plain = inherent.projector_inputs(model, projector, inputs["pixel_values"])
    noise_feats = inherent.projector_inputs(model, projector, inherent.noise_images(
        (3, 32, 32), 6, processor.image_processor.image_mean, processor.image_processor.image_std, 0))
    seen = []
    handle = projector.register_forward_hook(lambda m, args, out: seen.append(args[0].detach()))
    try:
        _generate(model, inputs, dec, max_new_tokens=1)
    finally:
        handle.remove()
    assert torch.allclose(seen[0], plain - 0.5 * noise_feats.mean(dim=0, keepdim=True), atol=1e-5)
    inherent._MEMO.clear()  # a new process: the file is read, not recomputed
    again = decoding.prepare(model, processor, _inputs(processor), setting, home)
    assert again.stats()["inherent_bias"] == "cached"
    assert torch.equal(again._pre_hooks[0][1].bias, dec._pre_hooks[0][1].bias)


def test_statistical_weights_keep_a_single_caption_token():
    torch.manual_seed(0)
    features = torch.randn(2, 9, 16)
    one = torch.randn(1, 12)
    weights, kept, fell_back = reweight.patch_weights(features, one, threshold=-1.0, gamma=3.0, gain=0.5)
    assert weights.shape == (2, 9) and kept.shape == (2, 1) and kept.all() and not fell_back.any()
    assert ((weights == 0) | (weights > 0.5)).all() and (weights.max(dim=-1).values == 1).all()
    # nothing clears the threshold: the best token is kept rather than failing
    many = torch.randn(5, 12)
    weights, kept, fell_back = reweight.patch_weights(features, many, threshold=1.5, gamma=3.0, gain=0.5)
    assert fell_back.all() and (kept.sum(dim=-1) == 1).all() and torch.isfinite(weights).all()
    flat = reweight.stretch(torch.ones(3, 4), 3.0)
    assert torch.equal(flat, torch.zeros(3, 4))
    out = reweight.reshape_features(features, weights, torch.ones(1, 9, 16), 0.1)
    assert torch.allclose(out, features - 0.1 + features * weights[..., None])


def test_attack_is_bounded_and_lowers_the_caption_match(vlm_dir, vlm):
    from toolpath.policies.decoding import attack, caption

    model, processor = vlm
    clip, tok = caption.load_clip(vlm_dir / "clip", torch.device("cpu"))
    pixels = _inputs(processor)["pixel_values"]
    mean, std = processor.image_processor.image_mean, processor.image_processor.image_std
    adv, taken = attack.adversarial_image(clip, tok, pixels, "a red circle .", epsilon=0.01, steps=5, lr=0.01,
                                          scale=12.0, mean=mean, std=std)
    assert adv.shape == pixels.shape and adv.dtype == pixels.dtype
    assert (adv - pixels).abs().max() <= 12.0 * 0.01 + 1e-5
    m, s = torch.tensor(mean).view(1, 3, 1, 1), torch.tensor(std).view(1, 3, 1, 1)
    assert (adv >= (0 - m) / s - 1e-5).all() and (adv <= (1 - m) / s + 1e-5).all()

    def match(x):
        enc = tok("a red circle .", return_tensors="pt")
        with torch.no_grad():
            return torch.cosine_similarity(attack._features(clip.get_image_features(pixel_values=x)),
                                           attack._features(clip.get_text_features(**enc))).item()
    if taken:
        assert match(adv) < match(pixels)
    again, _ = attack.adversarial_image(clip, tok, pixels, "a red circle .", epsilon=0.01, steps=5, lr=0.01,
                                        scale=12.0, mean=mean, std=std)
    assert torch.equal(adv, again)


def test_caption_features_drop_only_a_start_token(vlm_dir):
    from toolpath.policies.decoding import caption

    clip, tok = caption.load_clip(vlm_dir / "clip", torch.device("cpu"))
    assert caption.caption_features(clip, tok, "a red circle").shape == (4, 24)  # a red circle </s>
    assert caption.trim_caption("a red circle . a blue") == "a red circle ."
    assert caption.trim_caption("no full stop") == "no full stop"


def test_shield_without_a_clip_says_so(vlm, tmp_path):
    model, processor = vlm
    inputs = _inputs(processor)
    with pytest.raises(ValueError, match="decoding.clip"):
        decoding.prepare(model, processor, inputs, {"kind": "shield", "clip": str(tmp_path / "nowhere")}, tmp_path)
    model.name_or_path, kept = str(tmp_path), model.name_or_path
    try:
        with pytest.raises(ValueError, match="CLIP text encoder"):
            decoding.prepare(model, processor, inputs, {"kind": "shield", **FAST}, tmp_path)
        # the inherent part needs no CLIP
        decoding.prepare(model, processor, inputs, ALONE["inherent"], tmp_path)
    finally:
        model.name_or_path = kept


# ---- options and the spec ----------------------------------------------------------------------------------------
def validate(value):
    """A decoding setting as the spec's check stores it: {"kind": ..., every option}."""
    from toolpath.policies.settings import setting

    return setting("decoding", value).dump()


def test_validate_defaults():
    assert validate("vcd") == {"kind": "vcd", "alpha": 1.0, "beta": 0.1, "noise_step": 500,
                                        "schedule": "sigmoid", "seed": 0}
    s = validate({"kind": "shield"})
    assert (s["alpha"], s["beta"], s["gamma"], s["gain"], s["bias_weight"]) == (2.0, 0.35, 3.0, 0.5, 0.1)
    assert (s["epsilon"], s["steps"], s["noise_images"]) == (0.14, 30, 32)
    assert s["statistical"] and s["inherent"] and s["vulnerability"]
    alone = validate({"kind": "shield", "parts": ["inherent"]})
    assert (alone["statistical"], alone["inherent"], alone["vulnerability"]) == (False, True, False)
    assert validate(alone) == alone  # normalised settings validate to themselves


@pytest.mark.parametrize("setting, message", [
    ({"kind": "dola"}, "decoding.kind: unknown kind 'dola'; known: vcd, shield"),
    ({"kind": "vcd", "alpha": -1}, "decoding.alpha: Input should be greater than 0 (got -1)"),
    ({"kind": "vcd", "beta": 2}, "decoding.beta: Input should be less than or equal to 1 (got 2)"),
    ({"kind": "vcd", "noise_step": 1000}, "decoding.noise_step: Input should be less than or equal to 999"),
    ({"kind": "vcd", "alpha": float("nan")}, "decoding.alpha: Input should be a finite number"),
    ({"kind": "vcd", "alpha": True}, "decoding.alpha: Input should be a valid number (got True)"),
    ({"kind": "vcd", "seed": "1"}, "decoding.seed: Input should be a valid integer"),
    ({"kind": "vcd", "gamma": 3}, "decoding.gamma: vcd has no option 'gamma'"),
    ({"kind": "shield", "parts": ["statistical", "spatial"]}, "decoding.parts[1]: Input should be 'statistical', "
                                                               "'inherent' or 'vulnerability' (got 'spatial')"),
    ({"kind": "shield", "parts": "inherent", "inherent": True}, "decoding.inherent: give the parts either as `parts` "
                                                                "or as booleans, not both"),
    ({"kind": "shield", "clip": " "}, "decoding.clip: expected a non-empty string"),
    ({"kind": "shield", "statistcal": False}, "decoding.statistcal: shield has no option"),
    ({"kind": "shield", "statistical": False, "inherent": False, "vulnerability": False},
     "decoding.parts: shield needs at least one part on"),
    ({"kind": "shield", "parts": []}, "decoding.parts: shield needs at least one part on"),
    ({"kind": "shield", "inherent": "yes"}, "decoding.inherent: Input should be a valid boolean"),
    ({"alpha": 1}, "decoding.kind: missing"),
    (3, "decoding: expected a mapping"),
])
def test_bad_options_are_named(setting, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        validate(setting)


def test_spec_validates_decoding():
    from toolpath.policies.settings import settled  # where an episode starts: each kind's options, once

    spec = settled(TaskSpec.model_validate({"id": "t", "instruction": "x",
                                            "model": {"name": "local", "options": {"decoding": "shield"}}}))
    assert spec.model.options["decoding"]["kind"] == "shield" and spec.model.options["decoding"]["gamma"] == 3.0
    with pytest.raises(ValueError) as err:
        settled(TaskSpec.model_validate({"id": "t", "instruction": "x", "model": {
            "name": "local", "options": {"decoding": {"kind": "vcd", "alpha": -1}}}}))
    assert "model.options.decoding.alpha: Input should be greater than 0 (got -1)" in str(err.value)
    from toolpath import registry

    assert set(registry.names("decoder")) == {"vcd", "shield"}
    assert SpecError  # the CLI reports these as a SpecError naming the file and field


def test_any_dtype_and_inference_mode(vlm_dir, tmp_path):
    """bfloat16 weights and pixels, everything prepared and run inside inference_mode (as a policy does)."""
    model = transformers.LlavaForConditionalGeneration.from_pretrained(vlm_dir, dtype=torch.bfloat16).eval()
    processor = transformers.AutoProcessor.from_pretrained(vlm_dir)
    for setting in ("vcd", {"kind": "shield", **FAST}):
        with torch.inference_mode():
            inputs = _inputs(processor)
            inputs["pixel_values"] = inputs["pixel_values"].to(torch.bfloat16)
            dec = decoding.prepare(model, processor, inputs, setting, tmp_path)
            out = _generate(model, inputs, dec, max_new_tokens=3)
        assert out.shape[1] == inputs["input_ids"].shape[1] + 3
        assert dec.stats()["extra_forward_passes"] >= 3


def test_benchmark_probe_and_paired_f1_interval(vlm_dir, tmp_path):
    """benchmarks/decoding.py's image-ablation probe: a grey image asked as the real one moves no margin (the
    shift is what the image adds), and the paired F1 interval is zero for a row that answers as greedy does."""
    import importlib.util
    import sys
    from pathlib import Path

    from PIL import Image

    from toolpath.evals.benchmarks import Record

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "decoding.py"
    spec = importlib.util.spec_from_file_location("decoding_script", path)
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script
    try:
        spec.loader.exec_module(script)
        grey, red = tmp_path / "grey.png", tmp_path / "red.png"
        Image.new("RGB", (32, 32), (128, 128, 128)).save(grey)
        Image.new("RGB", (32, 32), (220, 20, 20)).save(red)
        records = [Record(f"q{i}", "adversarial", {"question": "Is there a red circle in the image?", "label": label,
                                                   "image": str(image)})
                   for i, (label, image) in enumerate([("no", grey), ("yes", red), ("no", red)])]
        policy = script.load_policy(f"hf:{vlm_dir}", None)
        (folder := tmp_path / "probe").mkdir()
        row = script.probe_rows(policy, records, folder)["adversarial"]
        assert row["negatives"] == 2 and row["positives_image_shift"]["n"] == 1
        ids = script.yes_no_ids(policy.tokenizer)
        assert script.yes_margin(policy, records[0].data["question"], str(grey), ids) == pytest.approx(
            script.yes_margin(policy, records[0].data["question"], script.grey_like(str(grey), folder), ids))
        samples = [{"label_yes": float(i % 2), "said_yes": float(i % 3 == 0), "said_no": float(i % 3 != 0)}
                   for i in range(12)]
        assert script.f1_gain_ci(samples, samples) == (0.0, 0.0)
        low, high = script.f1_ci(samples)
        assert 0.0 <= low <= high <= 1.0
    finally:
        sys.modules.pop(spec.name, None)

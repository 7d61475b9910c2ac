"""Assembling and writing the tiny VLM as a plain transformers LLaVA folder: the trained CLIP's vision tower,
the language model (with an added `<image>` token), the projector, and a LlavaProcessor whose chat template
places images, so `AutoModelForImageTextToText` + `AutoProcessor` use it with nothing of ours."""

from __future__ import annotations

from pathlib import Path

IMAGE_TOKEN = "<image>"
# ChatML, as the language model was tuned on, with an image item written as the image token and a newline
# (LLaVA's convention). No default system prompt: the model was trained without one.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{ '<image>\\n' }}"
    "{%- elif item['type'] == 'text' -%}{{ item['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


def vlm_tokenizer(lm_folder):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(lm_folder)
    tok.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    tok.chat_template = CHAT_TEMPLATE
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def build_processor(tokenizer, image_processor, clip_config):
    from transformers import LlavaProcessor

    vc = clip_config.vision_config
    return LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=vc.patch_size,
                          vision_feature_select_strategy="default", chat_template=CHAT_TEMPLATE,
                          image_token=IMAGE_TOKEN, num_additional_image_tokens=1)


def build_llava(clip, lm_folder, tokenizer, seed: int):
    """A LlavaForConditionalGeneration with the CLIP's vision tower, the language model's weights (its
    embeddings grown by the image token) and a fresh projector."""
    import torch
    from transformers import AutoModelForCausalLM, LlavaConfig, LlavaForConditionalGeneration

    lm = AutoModelForCausalLM.from_pretrained(lm_folder, dtype=torch.float32)
    lm.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    with torch.no_grad():  # the image token's row is never an input (features replace it); keep it harmless
        emb = lm.get_input_embeddings().weight
        emb[-1] = emb[:-1].mean(0)
    vc = clip.config.vision_config
    config = LlavaConfig(vision_config=vc.to_dict() | {"model_type": "clip_vision_model"},
                         text_config=lm.config.to_dict(), image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
                         projector_hidden_act="gelu", vision_feature_layer=-1,
                         vision_feature_select_strategy="default",
                         image_seq_length=(vc.image_size // vc.patch_size) ** 2,
                         tie_word_embeddings=bool(lm.config.tie_word_embeddings))
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    model.model.vision_tower.load_state_dict(clip.vision_model.state_dict())
    model.model.language_model.load_state_dict(lm.model.state_dict())
    model.lm_head.load_state_dict(lm.lm_head.state_dict())
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.do_sample = False
    return model.eval()


def write_folder(target: Path, model, processor, clip, clip_tok) -> None:
    """The LLaVA folder at `target`, with the whole CLIP (both towers and its tokenizer) under clip/."""
    target.mkdir(parents=True)
    model.save_pretrained(target)
    processor.save_pretrained(target)
    clip.save_pretrained(target / "clip")
    clip_tok.save_pretrained(target / "clip")
    processor.image_processor.save_pretrained(target / "clip")

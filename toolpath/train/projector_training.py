"""Stage 2 of the tiny VLM: the LLaVA projector (and optionally LoRA adapters on the frozen language model,
merged back before saving) trained on captions and question-answer turns about each image.

The vision tower stays frozen, so its features are computed once per image. A training sequence is one image
followed by several question-answer turns; the loop itself (placeholders, answer-only loss, the schedule) is
connector_training's, shared with the tiny graph-LM.
"""

from __future__ import annotations

import random

from . import connector_training as ct
from .llava_folder import IMAGE_TOKEN
from .vlm_data import CAPTION_PROMPT, ImageQA, caption_variants

LORA_TARGETS = ("q_proj", "v_proj", "o_proj", "down_proj")


def vision_features(model, pixels, batch: int = 256):
    """The vision tower's patch features as the LLaVA model selects them (layer and CLS strategy of its config)."""
    import torch

    cfg = model.config
    out = []
    with torch.no_grad():
        for i in range(0, len(pixels), batch):
            hs = model.model.vision_tower(pixels[i:i + batch], output_hidden_states=True).hidden_states
            f = hs[cfg.vision_feature_layer]
            out.append(f[:, 1:] if cfg.vision_feature_select_strategy == "default" else f)
    return torch.cat(out)


def encode_dialog(tokenizer, turns: list[tuple[str, str]], n_image_tokens: int) -> tuple[list[int], list[int]]:
    """(input ids, labels) of one image followed by the turns, as the chat template renders them; labels are
    -100 except on each answer and its end-of-turn token."""
    return ct.encode_dialog(tokenizer, turns, n_image_tokens, placeholder=IMAGE_TOKEN, item="image")


def sample_dialog(rng: random.Random, ex: ImageQA, max_turns: int) -> list[tuple[str, str]]:
    """A few of the image's questions, and sometimes a request for its caption."""
    turns = []
    k = rng.randint(1, max_turns)
    if rng.random() < 0.35 or not ex.qa:
        prompts = caption_variants(ex.caption)
        turns.append((CAPTION_PROMPT if rng.random() < 0.6 else rng.choice(prompts), ex.caption + "."))
    turns += rng.sample(ex.qa, min(len(ex.qa), k - len(turns))) if k > len(turns) else []
    rng.shuffle(turns)
    return turns


def add_lora(model, rank: int, seed: int):
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    cfg = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=list(LORA_TARGETS))
    model.model.language_model = get_peft_model(model.model.language_model, cfg)
    return [p for n, p in model.model.language_model.named_parameters() if "lora_" in n]


def merge_lora(model) -> None:
    lm = model.model.language_model
    if hasattr(lm, "merge_and_unload"):
        model.model.language_model = lm.merge_and_unload()


def train_projector(model, tokenizer, feats, examples: list[ImageQA], *, steps: int, batch: int, lr: float,
                    lora_rank: int, lora_lr: float, max_turns: int, seed: int, progress=None) -> dict:
    """Train the projector (and LoRA, rank > 0) with the rest frozen; feats[i] are examples[i]'s features.
    `progress`: a toolpath.progress.Progress told of each step and its running loss."""
    ct.freeze(model)
    proj = model.model.multi_modal_projector
    groups = [{"params": ct.trainable(proj.parameters()), "lr": lr}]
    if lora_rank > 0:
        groups.append({"params": add_lora(model, lora_rank, seed), "lr": lora_lr})
    lm = ct.ChatLM(model.get_input_embeddings(), model.model.language_model, model.lm_head)
    image_id = model.config.image_token_id
    n_img = feats.shape[1]

    def batch_loss(rng: random.Random):
        idx = [rng.randrange(len(examples)) for _ in range(batch)]
        enc = [encode_dialog(tokenizer, sample_dialog(rng, examples[i], max_turns), n_img) for i in idx]
        ids, labels, mask = ct.collate(enc, tokenizer.pad_token_id)
        return ct.answer_loss(lm, ids, labels, mask, image_id, proj(feats[idx]))

    model.train()
    stats = ct.train_connector(groups, batch_loss, steps=steps, seed=seed, progress=progress)
    if lora_rank > 0:
        merge_lora(model)
    model.eval()
    ct.freeze(model)
    return {"steps": steps, "batch": batch, "lora_rank": lora_rank} | stats

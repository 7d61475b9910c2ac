"""Stage 2 of the tiny VLM: the LLaVA projector (and optionally LoRA adapters on the frozen language model,
merged back before saving) trained on captions and question-answer turns about each image.

The vision tower stays frozen, so its features are computed once per image. A training sequence is one image
followed by several question-answer turns, rendered by the folder's own chat template (so training and use
see the same text); only the answers (and the end-of-turn token that stops generation) carry loss, and the
vocabulary projection is computed only there (it is a fifth of the model's work at every other position).
"""

from __future__ import annotations

import math
import random
import time

import numpy as np

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
    messages = []
    for i, (q, a) in enumerate(turns):
        content = ([{"type": "image"}] if i == 0 else []) + [{"type": "text", "text": q}]
        messages += [{"role": "user", "content": content},
                     {"role": "assistant", "content": [{"type": "text", "text": a}]}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    text = text.replace(IMAGE_TOKEN, IMAGE_TOKEN * n_image_tokens, 1)
    spans, pos = [], 0
    for _, a in turns:  # each answer as the template wrote it: after the assistant header, up to <|im_end|>
        head = text.index("<|im_start|>assistant\n", pos) + len("<|im_start|>assistant\n")
        end = text.index("<|im_end|>", head) + len("<|im_end|>")
        if text[head:end - len("<|im_end|>")] != a:
            raise ValueError(f"the chat template changed the answer {a!r}: {text[head:end]!r}")
        spans.append((head, end))
        pos = end
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    labels = [t if any(s <= o0 and o1 <= e for s, e in spans) and o1 > o0 else -100
              for t, (o0, o1) in zip(enc["input_ids"], enc["offset_mapping"])]
    return enc["input_ids"], labels


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
    import torch
    import torch.nn.functional as F

    for p in model.parameters():
        p.requires_grad_(False)
    proj = model.model.multi_modal_projector
    for p in proj.parameters():
        p.requires_grad_(True)
    embed, head = model.get_input_embeddings(), model.lm_head
    groups = [{"params": list(proj.parameters()), "lr": lr}]
    if lora_rank > 0:
        lora = add_lora(model, lora_rank, seed)
        groups.append({"params": lora, "lr": lora_lr})
    lm = model.model.language_model
    image_id = model.config.image_token_id
    n_img = feats.shape[1]
    opt = torch.optim.AdamW(groups, weight_decay=0.0)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))))
    rng = random.Random(seed)
    model.train()
    start, losses, seen = time.monotonic(), [], 0
    for _step in range(steps):
        idx = [rng.randrange(len(examples)) for _ in range(batch)]
        enc = [encode_dialog(tokenizer, sample_dialog(rng, examples[i], max_turns), n_img) for i in idx]
        width = max(len(ids) for ids, _ in enc)
        ids = torch.full((batch, width), tokenizer.pad_token_id)
        labels = torch.full((batch, width), -100)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for r, (x, y) in enumerate(enc):
            ids[r, :len(x)], labels[r, :len(y)], mask[r, :len(x)] = torch.tensor(x), torch.tensor(y), 1
        x = embed(ids)
        img = proj(feats[idx])
        x = x.masked_scatter((ids == image_id)[..., None].expand_as(x), img.to(x.dtype))
        h = lm(inputs_embeds=x, attention_mask=mask).last_hidden_state
        # next-token prediction: position t predicts labels[t + 1]
        target = labels[:, 1:]
        keep = target != -100
        logits = head(h[:, :-1][keep])
        loss = F.cross_entropy(logits.float(), target[keep])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        seen += int(keep.sum())
        if progress:
            progress.update(value=f"loss {np.mean(losses[-10:]):.3f}")
    if lora_rank > 0:
        merge_lora(model)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return {"steps": steps, "batch": batch, "lora_rank": lora_rank, "answer_tokens": seen,
            "final_loss": float(np.mean(losses[-10:])) if losses else None,
            "seconds": round(time.monotonic() - start, 1)}

"""Stage 1 of the tiny VLM: a small CLIP dual encoder (transformers' own `CLIPModel`) trained contrastively on
images and their captions, so its vision tower plugs into LlavaForConditionalGeneration unchanged and its text
tower is there for decoders that compare image patches with caption words (SHIELD).

The text tower reuses the language model's BPE tokenizer, with an end-of-text token appended by the
tokenizer itself (CLIP pools the text at the first end-of-text token, so every caption must carry one).
Captions repeat a lot here ("a red circle" is many images), so the loss treats every pair with the same
caption as a positive instead of pushing identical captions apart.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .steps import optimizer_step

CLIP_EOS = "<|endoftext|>"


@dataclass(frozen=True)
class ClipSize:
    image_size: int = 64
    patch_size: int = 8
    width: int = 192
    layers: int = 4
    heads: int = 4
    text_width: int = 128
    text_layers: int = 4
    text_positions: int = 32
    embed_dim: int = 128


def clip_tokenizer(lm_folder):
    """The language model's tokenizer, changed to end every text with CLIP_EOS and to pad with it."""
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(lm_folder)
    eos_id = tok.get_vocab().get(CLIP_EOS)
    if eos_id is None:
        raise ValueError(f"the tokenizer in {lm_folder} has no {CLIP_EOS} token for CLIP's text pooling")
    tok._tokenizer.post_processor = TemplateProcessing(
        single=f"$A {CLIP_EOS}", pair=f"$A {CLIP_EOS} $B {CLIP_EOS}", special_tokens=[(CLIP_EOS, eos_id)])
    tok.eos_token = tok.pad_token = CLIP_EOS
    tok.padding_side = "right"
    tok.chat_template = None
    return tok


def image_processor(size: int):
    """CLIP's preprocessing at `size` px, squashing instead of centre-cropping (a crop could cut off an object
    at the border, and a question about it would then be unanswerable)."""
    from transformers import CLIPImageProcessor

    return CLIPImageProcessor(size={"height": size, "width": size}, do_center_crop=False,
                              crop_size={"height": size, "width": size})


def build_clip(size: ClipSize, tokenizer, seed: int):
    import torch
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(seed)
    eos = tokenizer.convert_tokens_to_ids(CLIP_EOS)
    config = CLIPConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=size.text_width, intermediate_size=4 * size.text_width,
                         num_hidden_layers=size.text_layers, num_attention_heads=max(1, size.text_width // 64),
                         max_position_embeddings=size.text_positions, eos_token_id=eos, pad_token_id=eos,
                         bos_token_id=eos, projection_dim=size.embed_dim),
        vision_config=dict(image_size=size.image_size, patch_size=size.patch_size, hidden_size=size.width,
                           intermediate_size=4 * size.width, num_hidden_layers=size.layers,
                           num_attention_heads=size.heads, projection_dim=size.embed_dim),
        projection_dim=size.embed_dim)
    return CLIPModel(config)


def pixel_values(processor, images: list[np.ndarray]):
    import torch

    out = [processor(images[i:i + 512], return_tensors="pt")["pixel_values"] for i in range(0, len(images), 512)]
    return torch.cat(out) if out else torch.zeros(0)


def _caption_ids(captions: list[str]) -> tuple[list[str], np.ndarray]:
    unique = sorted(set(captions))
    index = {c: i for i, c in enumerate(unique)}
    return unique, np.array([index[c] for c in captions])


def _group_members(groups) -> list:
    """Item indices of each group, as tensors."""
    import torch

    ids = np.asarray(groups)
    return [torch.as_tensor(np.flatnonzero(ids == g)) for g in np.unique(ids)]


def _batch_indices(n: int, batch: int, gen, members=None):
    """`batch` random items, or with `members` (one index tensor per group) random whole groups until `batch` is
    filled (the last group cut where the sizes do not divide it)."""
    import torch

    if members is None:
        return torch.randperm(n, generator=gen)[:batch]
    picked, size = [], 0
    for g in torch.randperm(len(members), generator=gen).tolist():
        if size >= batch:
            break
        picked.append(members[g])
        size += len(members[g])
    return torch.cat(picked)[:batch]


def train_clip(model, tokenizer, pixels, captions: list[str], *, steps: int, batch: int, lr: float, seed: int,
               progress=None, groups=None) -> dict:
    """Contrastive training with every same-caption pair a positive (soft targets, both directions).

    `groups` (one id per item): batches are made of whole groups, so items of one group are each other's
    negatives. Random batches of a large set almost never hold two copies of one picture; grouping the copies
    of a picture that differ only in how they look is what makes the caption's words about looks matter.
    `progress`: a toolpath.progress.Progress told of each step and its running loss."""
    import torch
    import torch.nn.functional as F

    unique, cap_of = _caption_ids(captions)
    tokens = tokenizer(unique, padding=True, truncation=True,
                       max_length=model.config.text_config.max_position_embeddings, return_tensors="pt")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    cap_of_t = torch.as_tensor(cap_of)
    members = _group_members(groups) if groups is not None else None
    model.train()
    start, losses = time.monotonic(), []
    for _step in range(steps):
        idx = _batch_indices(len(captions), batch, gen, members)
        caps = cap_of_t[idx]
        used, inverse = torch.unique(caps, return_inverse=True)
        img = F.normalize(model.get_image_features(pixel_values=pixels[idx]).pooler_output, dim=-1)
        txt = F.normalize(model.get_text_features(input_ids=tokens["input_ids"][used],
                                                  attention_mask=tokens["attention_mask"][used]).pooler_output, dim=-1)
        logits = model.logit_scale.exp().clamp(max=100) * img @ txt.T  # images × distinct captions in the batch
        loss_i = F.cross_entropy(logits, inverse)
        # text -> image: each caption's images share the probability mass
        same = (inverse[None, :] == torch.arange(len(used))[:, None]).float()
        loss_t = -(same / same.sum(1, keepdim=True) * F.log_softmax(logits.T, dim=1)).sum(1).mean()
        loss = (loss_i + loss_t) / 2
        optimizer_step(loss, opt, sched, losses, progress)
    model.eval()
    return {"steps": steps, "batch": batch, "final_loss": float(np.mean(losses[-20:])) if losses else None,
            "seconds": round(time.monotonic() - start, 1)}


def retrieval_accuracy(model, tokenizer, pixels, captions: list[str]) -> dict:
    """Image -> text top-1 accuracy among the distinct captions of the set (and how many candidates)."""
    import torch
    import torch.nn.functional as F

    unique, cap_of = _caption_ids(captions)
    with torch.no_grad():
        tokens = tokenizer(unique, padding=True, return_tensors="pt")
        txt = F.normalize(model.get_text_features(**tokens).pooler_output, dim=-1)
        img = torch.cat([F.normalize(model.get_image_features(pixel_values=pixels[i:i + 256]).pooler_output, dim=-1)
                         for i in range(0, len(pixels), 256)])
    hits = (img @ txt.T).argmax(1).numpy() == cap_of
    return {"top1": round(float(hits.mean()), 4), "images": len(captions), "candidates": len(unique)}

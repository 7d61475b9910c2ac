"""Training a connector that puts a non-text modality into a frozen chat language model: the one loop the tiny
VLM's projector and the tiny graph-LM's query connector share.

A frozen encoder's features go through a trainable connector; its output vectors replace the placeholder tokens
of a dialog rendered by the folder's own chat template (so training and use see the same text); the chat LM runs
on those embeddings and only the answers (and the end-of-turn token that stops generation) carry loss. The
vocabulary projection is computed only at answer positions (it is a fifth of the model's work everywhere else).
What trains besides the connector is the caller's choice: LoRA adapters (the VLM) or the LM's input embeddings
(the graph LM), each as one more parameter group.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .steps import optimizer_step

ASSISTANT_HEAD = "<|im_start|>assistant\n"
TURN_END = "<|im_end|>"


@dataclass(frozen=True)
class ChatLM:
    """The three parts of a causal chat LM the loop drives: the input embeddings, the transformer body
    (returning `last_hidden_state` from `inputs_embeds`) and the vocabulary head."""

    embed: Any
    body: Any
    head: Any


def encode_dialog(tokenizer, turns: list[tuple[str, str]], n_tokens: int, *, placeholder: str,
                  item: str | None) -> tuple[list[int], list[int]]:
    """(input ids, labels) of one modality item (`item`, a chat-template content type such as "image") followed by
    the turns, as the chat template renders them, with the template's one `placeholder` token repeated `n_tokens`
    times; labels are -100 except on each answer and its end-of-turn token. `item` None: text alone (the
    baselines that give the modality as text)."""
    messages = []
    for i, (q, a) in enumerate(turns):
        content = ([{"type": item}] if i == 0 and item else []) + [{"type": "text", "text": q}]
        messages += [{"role": "user", "content": content},
                     {"role": "assistant", "content": [{"type": "text", "text": a}]}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    text = text.replace(placeholder, placeholder * n_tokens, 1)
    spans, pos = [], 0
    for _, a in turns:  # each answer as the template wrote it: after the assistant header, up to <|im_end|>
        head = text.index(ASSISTANT_HEAD, pos) + len(ASSISTANT_HEAD)
        end = text.index(TURN_END, head) + len(TURN_END)
        if text[head:end - len(TURN_END)] != a:
            raise ValueError(f"the chat template changed the answer {a!r}: {text[head:end]!r}")
        spans.append((head, end))
        pos = end
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    labels = [t if any(s <= o0 and o1 <= e for s, e in spans) and o1 > o0 else -100
              for t, (o0, o1) in zip(enc["input_ids"], enc["offset_mapping"])]
    return enc["input_ids"], labels


def collate(encoded: list[tuple[list[int], list[int]]], pad_id: int):
    """(ids, labels, attention mask) tensors of the dialogs, right-padded to the longest."""
    import torch

    width = max(len(ids) for ids, _ in encoded)
    ids = torch.full((len(encoded), width), pad_id)
    labels = torch.full((len(encoded), width), -100)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for r, (x, y) in enumerate(encoded):
        ids[r, :len(x)], labels[r, :len(y)], mask[r, :len(x)] = torch.tensor(x), torch.tensor(y), 1
    return ids, labels, mask


def pack(encoded: list[tuple[list[int], list[int]]]):
    """(ids, labels, position ids) of the dialogs end to end in one row, each dialog's positions counting from 0:
    what `answer_loss` reads as separate sequences (no token attends across a dialog's start), with no padding.
    The loss is the padded batch's (collate) to rounding, for the tokens padding would have wasted."""
    import torch

    ids = torch.tensor([t for x, _ in encoded for t in x])[None]
    labels = torch.tensor([t for _, y in encoded for t in y])[None]
    positions = torch.cat([torch.arange(len(x)) for x, _ in encoded])[None]
    return ids, labels, positions


def answer_loss(lm: ChatLM, ids, labels, mask, placeholder_id: int, vectors, positions=None):
    """(cross-entropy on the answer tokens, their number): `vectors` (the connector's output, one row per
    placeholder in reading order: dialog by dialog, left to right) replace the placeholders' embeddings.
    `mask` None and `positions` given: the row holds packed dialogs (`pack`), told apart by their positions."""
    import torch.nn.functional as F

    if mask is None and positions is None:
        raise ValueError("answer_loss needs an attention mask (collate) or position ids (pack)")
    x = lm.embed(ids)
    slots = (ids == placeholder_id)[..., None].expand_as(x)
    x = x.masked_scatter(slots, vectors.reshape(-1, x.shape[-1]).to(x.dtype))
    # no cache: training reads each sequence once, and transformers tells packed dialogs apart only without one
    h = lm.body(inputs_embeds=x, attention_mask=mask, position_ids=positions, use_cache=False).last_hidden_state
    target = labels[:, 1:]  # next-token prediction: position t predicts labels[t + 1]
    # (packed, a dialog's first token is never an answer, so no position learns across a dialog's start)
    keep = target != -100
    logits = lm.head(h[:, :-1][keep])
    return F.cross_entropy(logits.float(), target[keep]), int(keep.sum())


def warmup_cosine(opt, steps: int):
    """A tenth of the steps of linear warm-up, then cosine down to a tenth of the rate."""
    import torch

    warm = max(1, steps // 10)
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))))


def train_connector(groups: list[dict], batch_loss: Callable[[random.Random], tuple[Any, int]], *, steps: int,
                    seed: int, progress=None) -> dict:
    """AdamW over the parameter `groups` (each with its own "lr") for `steps` steps; `batch_loss(rng)` draws a
    batch with the seeded `rng` and returns (loss, answer tokens). `progress`: a toolpath.progress.Progress told
    of each step and its running loss."""
    import torch

    # fused: one pass over each parameter instead of the foreach path's several temporaries of its size
    opt = torch.optim.AdamW(groups, weight_decay=0.0, fused=True)
    sched = warmup_cosine(opt, steps)
    rng = random.Random(seed)
    start, losses, seen = time.monotonic(), [], 0
    for _step in range(steps):
        loss, answer_tokens = batch_loss(rng)
        optimizer_step(loss, opt, sched, losses, progress, window=10)
        seen += answer_tokens
    return {"steps": steps, "answer_tokens": seen, "final_loss": float(np.mean(losses[-10:])) if losses else None,
            "seconds": round(time.monotonic() - start, 1)}


def freeze(module) -> None:
    for p in module.parameters():
        p.requires_grad_(False)


def trainable(params) -> list:
    params = list(params)
    for p in params:
        p.requires_grad_(True)
    return params

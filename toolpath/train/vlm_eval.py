"""Measuring the tiny VLM through its saved folder only (AutoModelForImageTextToText + AutoProcessor, greedy):
easy-vqa exact match, yes/no accuracy on held-out scenes, the same with a blank image (a blind baseline: what
the language model answers from the question alone), and captions of held-out images."""

from __future__ import annotations

import random
import re

import numpy as np

from .vlm_data import CAPTION_PROMPT, ImageQA


def normalize(answer: str) -> str:
    return re.sub(r"[^a-z ]+", "", answer.lower()).strip()


def load(folder):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(folder)
    processor.tokenizer.padding_side = "left"
    return model, processor


def answer(model, processor, images: list[np.ndarray], questions: list[str], *, batch: int = 16,
           max_new_tokens: int = 6, progress=None) -> list[str]:
    """Greedy answers, one per (image, question); `progress` (toolpath.progress.Progress) counts them."""
    import torch

    out = []
    for i in range(0, len(questions), batch):
        texts = [processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": q}]}],
            add_generation_prompt=True, tokenize=False) for q in questions[i:i + batch]]
        inputs = processor(text=texts, images=list(images[i:i + batch]), padding=True, return_tensors="pt")
        with torch.no_grad():
            gen = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
        out += processor.batch_decode(gen[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        if progress:
            progress.update(len(texts))
    return [o.strip() for o in out]


def question_sample(examples: list[ImageQA], n: int, seed: int) -> list[tuple[int, str, str]]:
    """A fixed sample of (example index, question, answer) over all the examples' questions."""
    every = [(i, q, a) for i, ex in enumerate(examples) for q, a in ex.qa]
    return sorted(random.Random(seed).sample(every, min(n, len(every)))) if n < len(every) else every


def accuracy(model, processor, examples: list[ImageQA], sample: list[tuple[int, str, str]], *,
             blank: bool = False, first: int | None = None, progress=None) -> dict:
    """Exact match (after lower-casing and dropping punctuation) on the sample; `blank` replaces every image
    by a uniform grey one of the same size. `first`: also the accuracy on the sample's first N questions
    (to set beside a baseline measured on those)."""
    images = [examples[i].image for i, _, _ in sample]
    if blank:
        images = [np.full_like(im, 128) for im in images]
    got = answer(model, processor, images, [q for _, q, _ in sample], progress=progress)
    hits = [normalize(g) == normalize(a) for g, (_, _, a) in zip(got, sample)]
    yes = [normalize(g).startswith("yes") for g, (_, _, a) in zip(got, sample) if a in ("yes", "no")]
    out = {"accuracy": round(float(np.mean(hits)), 4) if hits else None, "questions": len(sample),
           "yes_ratio": round(float(np.mean(yes)), 4) if yes else None}
    if first and hits:
        out[f"accuracy_first_{first}"] = round(float(np.mean(hits[:first])), 4)
    return out


def majority_baseline(train: list[ImageQA], sample: list[tuple[int, str, str]]) -> dict:
    """The training set's most common answer, always."""
    from collections import Counter

    top, _ = Counter(a for ex in train for _, a in ex.qa).most_common(1)[0]
    return {"answer": top, "accuracy": round(float(np.mean([a == top for _, _, a in sample])), 4)}


def captions(model, processor, examples: list[ImageQA]) -> list[dict]:
    got = answer(model, processor, [ex.image for ex in examples], [CAPTION_PROMPT] * len(examples),
                 max_new_tokens=24)
    return [{"truth": ex.caption, "caption": g, "source": ex.source} for ex, g in zip(examples, got)]

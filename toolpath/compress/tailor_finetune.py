"""The default candidates: short fine-tunes of the base model on two kinds of real data, cached.

`english`: next-token loss on the training split of pydoc_data.topics. `toolcalls`: loss on the assistant's
tokens of solved arithmetic tool-call episodes (tailor_data). Only the decoder layers are trained (embeddings,
final norm and head stay the base model's): the layers are what tailoring recombines, and leaving the 49k-row
embedding out of the optimizer keeps a step affordable on a CPU. Each fine-tune is a folder under
$TOOLPATH_HOME/models/tailor-…, named by the base model (its name and its fingerprint, so a changed model at
the same path is fine-tuned again), the data and the recipe, so it is made once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

from ..paths import models_dir
from ..progress import Progress
from . import tailor_data

RECIPES = ("english", "toolcalls")
LR = 1e-4
ENGLISH_BATCH, ENGLISH_LENGTH = 4, 128
TRANSCRIPT_BATCH = 2


def cache_dir(source_key: str, fingerprint: str, recipe: str, steps: int, seed: int) -> Path:
    digest = hashlib.sha256(json.dumps([fingerprint, recipe, steps, seed, LR, 1]).encode()).hexdigest()[:12]
    slug = "".join(c if c.isalnum() else "-" for c in source_key.rpartition("/")[2])[:40]
    return models_dir() / f"tailor-{slug}-{recipe}-{digest}"


def _batches(tokenizer, recipe: str, steps: int):
    """`steps` batches of (input_ids, labels), labels -100 where no loss is taken."""
    import torch

    if recipe == "english":
        blocks = tailor_data.english_blocks(tokenizer, "train", steps * ENGLISH_BATCH, ENGLISH_LENGTH)
        if not blocks:
            raise ValueError("the English training text is empty")
        for s in range(steps):
            rows = [blocks[(s * ENGLISH_BATCH + j) % len(blocks)].ids for j in range(ENGLISH_BATCH)]
            ids = torch.cat(rows)
            yield ids, ids.clone()
        return
    episodes = tailor_data.transcripts(tokenizer, "train", steps * TRANSCRIPT_BATCH)
    for s in range(steps):
        chunk = episodes[s * TRANSCRIPT_BATCH:(s + 1) * TRANSCRIPT_BATCH]
        start = tailor_data.shared_prefix(chunk)
        ids, scored = tailor_data.suffix_batch(chunk, start, pad=0)
        labels = torch.full_like(ids, -100)
        for j, pos in enumerate(scored):
            labels[j, pos] = ids[j, pos]
        yield chunk, start, ids, labels


def _loss(model, batch):
    """The batch's loss. For transcripts, the shared prompt (system text and demonstration, no loss on it)
    runs once without gradient and the episodes continue from its cache: the loss is the same, the step is
    about three times cheaper, and the gradient reaches the layers through the episode's own tokens."""
    import torch

    from .tailor_layers import prefix_cache

    if len(batch) == 2:
        ids, labels = batch
        return model(input_ids=ids, labels=labels).loss
    chunk, _start, ids, labels = batch
    with torch.no_grad():
        start, cache = prefix_cache(model, chunk)
    logits = model(input_ids=ids, cache=cache).logits if cache is not None else model(input_ids=ids).logits
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                             labels[:, 1:].reshape(-1), ignore_index=-100)


def finetune(base, tokenizer, recipe: str, steps: int, seed: int, target: Path) -> Path:
    """Fine-tune a copy of `base` by `recipe` and save it to `target` (atomically); returns `target`."""
    import copy

    import torch

    if recipe not in RECIPES:
        raise ValueError(f"unknown fine-tune recipe {recipe!r}; recipes: {', '.join(RECIPES)}")
    torch.manual_seed(seed)
    model = copy.deepcopy(base)
    model.train()
    params = []
    for name, p in model.named_parameters():
        p.requires_grad_(".layers." in f".{name}")
        if p.requires_grad:
            params.append(p)
    optim = torch.optim.AdamW(params, lr=LR, weight_decay=0.0)
    losses = []
    with Progress(f"fine-tuning the {recipe} candidate", steps, unit="steps") as line:
        for batch in _batches(tokenizer, recipe, steps):
            loss = _loss(model, batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optim.step()
            optim.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            line.update(1, value=f"loss {losses[-1]:.3f}")
        line.close(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:6]}"
    tmp.mkdir(parents=True)
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / "tailor_finetune.json").write_text(json.dumps({"recipe": recipe, "steps": steps, "seed": seed,
                                                             "lr": LR, "losses": losses}, indent=1))
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "config.json").is_file():
            raise
    return target


def default_candidates(base, tokenizer, source_key: str, steps: int, seed: int, log=None) -> list[Path]:
    """The two default candidates' folders, made on first use."""
    from ..policies.fingerprint import model_fingerprint

    fingerprint = model_fingerprint(base)
    out = []
    for recipe in RECIPES:
        target = cache_dir(source_key, fingerprint, recipe, steps, seed)
        if not (target / "config.json").is_file():
            finetune(base, tokenizer, recipe, steps, seed, target)
        else:
            (log or (lambda _t: None))(f"candidate {recipe}: cached at {target}")
        out.append(target)
    return out

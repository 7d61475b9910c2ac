"""What compression calibrates on and measures with: the English text of toolpath/pydoc_text.py, its first 80 %
of topics for calibration (and training), the last 20 % held out for perplexity.
"""

from __future__ import annotations

from ..pydoc_text import split_text

DESCRIPTION = "pydoc_data.topics, topics sorted by name, first 80 % calibration / last 20 % held out"


def calibration_batches(tokenizer, nsamples: int, seqlen: int, seed: int = 0):
    """`nsamples` windows of `seqlen` tokens at seeded random places in the calibration text: [nsamples, seqlen]."""
    import torch

    text, _ = split_text()
    ids = tokenizer(text, return_tensors="pt")["input_ids"][0]
    if len(ids) <= seqlen + 1:
        raise ValueError(f"calibration text has {len(ids)} tokens, fewer than seqlen={seqlen}")
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(ids) - seqlen - 1, (nsamples,), generator=gen)
    return torch.stack([ids[s:s + seqlen] for s in starts.tolist()])


def perplexity(model, tokenizer, text: str | None = None, seqlen: int = 256, max_windows: int | None = None) -> float:
    """Perplexity over non-overlapping `seqlen`-token windows of `text` (default: the held-out part)."""
    import math

    import torch

    if text is None:
        text = split_text()[1]
    ids = tokenizer(text, return_tensors="pt")["input_ids"][0]
    n = len(ids) // seqlen
    if max_windows is not None:
        n = min(n, max_windows)
    if n == 0:
        raise ValueError(f"text has {len(ids)} tokens, fewer than one window of {seqlen}")
    total, count = 0.0, 0
    with torch.inference_mode():
        for i in range(n):
            x = ids[i * seqlen:(i + 1) * seqlen][None]
            loss = model(input_ids=x, labels=x).loss
            total += float(loss) * (seqlen - 1)
            count += seqlen - 1
    return math.exp(total / count)

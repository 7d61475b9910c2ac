"""The classic quality filter: how likely the proxy model finds a text. The score is the mean log-probability
of its tokens (higher: more fluent; perplexity is exp of minus it). It is the baseline AskLLM is measured
against: repeated or formulaic text is very likely to a language model without being informative."""

from __future__ import annotations

import math

from .proxy import Proxy

MAX_TOKENS = 512


def mean_log_prob(proxy: Proxy, text: str, max_tokens: int = MAX_TOKENS) -> float:
    tokenizer = proxy.tokenizer
    # The text is read after a start token, so its first token is predicted too (and a one-token text scores).
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    ids = [start] + proxy.encode(text)[:min(max_tokens, proxy.context - 1)]
    if len(ids) < 2:
        return -math.inf  # nothing to read
    chosen = proxy.token_log_probs(ids)
    return sum(chosen) / len(chosen)


def score(proxy: Proxy, texts: list[str], stage=None, max_tokens: int = MAX_TOKENS) -> list[float]:
    out = []
    for text in texts:
        out.append(mean_log_prob(proxy, text, max_tokens))
        if stage is not None:
            stage.update()
    return out

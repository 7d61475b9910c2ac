"""A policy that retries its model's transient errors (timeouts, rate limits, 5xx) with exponential backoff.

The eval runner wraps each episode's policy in one, so a flaky server costs a few seconds, not a sample; the
retries are counted and stored with the sample. A permanent error (bad request, missing model) is raised at
once; so is the last transient one, and the episode then fails with it, named.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from .base import PolicyError, Response


class RetryingPolicy:
    def __init__(self, inner, attempts: int = 4, backoff: float = 1.0, cap: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep):
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        self.inner = inner
        self.attempts = attempts
        self.backoff = backoff
        self.cap = cap
        self.sleep = sleep
        self.retries = 0  # transient errors retried, over the policy's life

    def __getattr__(self, name: str) -> Any:  # name, observes, … are the inner policy's
        return getattr(self.inner, name)

    def respond(self, messages: list, tools: list[dict], **generation: Any) -> Response:
        for attempt in range(1, self.attempts + 1):
            try:
                return self.inner.respond(messages, tools, **generation)
            except PolicyError as err:
                if not err.transient or attempt == self.attempts:
                    raise
                self.retries += 1
                # full jitter: parallel workers that failed together do not retry together
                self.sleep(random.uniform(0, min(self.cap, self.backoff * 2 ** (attempt - 1))))
        raise AssertionError("unreachable")

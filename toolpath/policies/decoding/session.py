"""What `prepare` hands the policy for one generate call: the logits processors, the forward hooks (installed only
for the duration of the call), and the cost the decoding added, for the run record."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel


class Tally:
    """The extra work a decoding did for one call: forward passes of the model beyond generate's own, and seconds."""

    def __init__(self) -> None:
        self.passes = 0
        self.seconds = 0.0

    def add(self, *, passes: int = 0, seconds: float = 0.0) -> None:
        self.passes += passes
        self.seconds += seconds

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - started


class Branch:
    """Which branch the model is running: hooks that reshape the real image's features leave the contrastive
    branch's alone (the reference computes its distorted branch from the plain encoder)."""

    def __init__(self) -> None:
        self.contrastive = False

    @contextlib.contextmanager
    def contrastive_branch(self) -> Iterator[None]:
        self.contrastive = True
        try:
            yield
        finally:
            self.contrastive = False


# A forward pre-hook: (module, args) -> new args or None. Installed on `module` while generate runs.
PreHook = tuple[Any, Callable[[Any, tuple], Any]]


class Decoding:
    """`.logits_processor` (pass to generate), `.hooks()` (wrap generate in it), `.stats()` (for the run record)."""

    def __init__(self, kind: str, options: BaseModel, *, processors: list | None = None,
                 pre_hooks: list[PreHook] | None = None, tally: Tally | None = None, details: dict | None = None,
                 skipped: str | None = None):
        from transformers import LogitsProcessorList

        self.kind = kind
        self.setting = options.model_dump()
        self.logits_processor = LogitsProcessorList(processors or [])
        self._pre_hooks = list(pre_hooks or [])
        self.tally = tally or Tally()
        self.details = details if details is not None else {}
        self.skipped = skipped

    @contextlib.contextmanager
    def hooks(self) -> Iterator[None]:
        """Install the forward hooks for one generate call; they are removed when it ends, error or not."""
        for processor in self.logits_processor:
            if hasattr(processor, "reset"):
                processor.reset()
        handles = []
        try:
            for module, hook in self._pre_hooks:
                handles.append(module.register_forward_pre_hook(hook))
            yield
        finally:
            for handle in handles:
                handle.remove()

    def stats(self) -> dict:
        out = {"kind": self.kind, "settings": self.setting, "extra_forward_passes": self.tally.passes,
               "seconds": round(self.tally.seconds, 4)}
        if self.skipped:
            out["skipped"] = self.skipped
        out.update(self.details)
        return out

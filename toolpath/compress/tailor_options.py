"""The `tailor` method's options: how many layers go, the search's budget, its candidates and its objective.

The highest value of each whole-number option is what one machine carries out in one sitting: a trial is one
evaluation of the tailored model on the calibration blocks (seconds for a small model), a fine-tune step one
optimizer step of a whole model, a calibration block 128 tokens of each data kind (the English text holds a few
hundred); `remove` is bounded by the model's layers too (target_removed); every candidate is a whole model in
memory (MAX_CANDIDATES).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, Field, field_validator, model_validator

from .options import MethodOptions, Seed

MAX_CANDIDATES = 8


def _objective(value) -> dict[str, float]:
    """Weights of perplexity and accuracy, "ppl:0.5,acc:0.5" on the command line or a mapping."""
    if isinstance(value, dict):
        weights = dict(value)
    else:
        weights = {}
        for part in str(value).split(","):
            key, sep, number = part.partition(":")
            key = key.strip()
            if not sep:
                raise ValueError("expected weights like 'ppl:0.5,acc:0.5'")
            try:
                weights[key] = float(number)
            except ValueError:
                raise ValueError(f"the weight of {key!r} is not a number: {number!r}") from None
    unknown = sorted(set(weights) - {"ppl", "acc"})
    if unknown:
        raise ValueError(f"expected weights of ppl and acc like 'ppl:0.5,acc:0.5', not of {', '.join(unknown)}")
    for key, weight in weights.items():
        if not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"the weight of {key!r} must be a finite number >= 0")
    if sum(weights.values()) <= 0:
        raise ValueError("at least one weight must be above 0")
    return {"ppl": float(weights.get("ppl", 0.0)), "acc": float(weights.get("acc", 0.0))}


def _folders(value) -> list[Path]:
    """Model folders, "PATH,PATH" on the command line or a sequence."""
    items = str(value).split(",") if isinstance(value, str) else list(value)
    paths = [Path(str(p).strip()).expanduser() for p in items if str(p).strip()]
    if not paths:
        raise ValueError("expected model folders separated by commas, got none")
    return paths


class TailorOptions(MethodOptions):
    remove: int | None = Field(None, ge=1, le=10_000, description="decoder layers to remove")
    keep: float | None = Field(None, gt=0, lt=1, description="or the share of layers to keep (default 0.75)")
    trials: int = Field(40, ge=1, le=2_000, description="objective evaluations of the whole search")
    seed: Seed = 0
    candidates: Annotated[list[Path], BeforeValidator(_folders)] = Field(
        default_factory=list, description="fine-tuned variants of the model; none given: two are made and cached")
    objective: Annotated[dict[str, float], BeforeValidator(_objective)] = Field(
        default_factory=lambda: {"ppl": 0.5, "acc": 0.5}, description="weights of perplexity and accuracy")
    finetune_steps: int = Field(8, ge=1, le=10_000, description="optimizer steps of each default fine-tune")
    calib_blocks: int = Field(2, ge=1, le=512, description="calibration blocks per data kind (English text, "
                                                            "tool-call transcripts)")

    @field_validator("candidates")
    @classmethod
    def _model_folders(cls, paths: list[Path]) -> list[Path]:
        if len(paths) > MAX_CANDIDATES:
            raise ValueError(f"at most {MAX_CANDIDATES} folders (each is a whole model in memory), got {len(paths)}")
        for p in paths:
            if not (p / "config.json").is_file():
                raise ValueError(f"{p} is not a model folder (no config.json)")
        return paths

    @model_validator(mode="after")
    def _one_target(self):
        if self.remove is not None and self.keep is not None:
            raise ValueError("remove and keep both name the target: give one of them")
        return self

    def target_removed(self, layers: int) -> int:
        """How many of `layers` decoder layers to remove (at least one is removed, at least one kept)."""
        if self.remove is not None:
            n, name = self.remove, "remove"
        else:
            n, name = layers - math.floor(layers * (0.75 if self.keep is None else self.keep) + 1e-9), "keep"
        if not 0 < n < layers:
            raise ValueError(f"tailor option {name!r}: removing {n} of {layers} layers is not possible "
                             f"(remove at least one layer and keep at least one)")
        return n

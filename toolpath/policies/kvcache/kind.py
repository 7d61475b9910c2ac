"""What every kv-cache kind is made of, written once so that no two kinds read a setting differently.

A kind is a `CacheKind` (the registry's `kv_cache` target, `KIND` in its module):

    name      the name it is registered under
    short     the option the N of `KIND:N` sets ("bits" of a quantized cache, "budget" of a sparse one)
    Options   its options, a `CacheOptions` model: ranges and choices as field constraints
    refuse    why it cannot run with a model config, or None (default: `attention_refusal`)
    attach    (model, options) -> a fresh transformers Cache for one generate()/forward sequence

The rules shared by every kind live here: a number written as text ("4", as `KIND:4` and `--option k=4` give
it) is that number (`Whole`); a token budget is a positive whole number or unlimited (`Budget`); and one rule
says which models a cache that keeps keys per layer cannot serve (`attention_refusal`).

This module imports neither torch nor transformers: validating a setting and `models list` stay light.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

_INTEGER = re.compile(r"\s*[+-]?\d+\s*")


def _digits(value: Any) -> Any:
    """Text that spells a whole number is that number; anything else goes on to the field's own check, but never
    true or false (a Literal[1, 2] would take true as 1)."""
    if isinstance(value, bool):
        raise ValueError("expected a number, not true or false")
    return int(value) if isinstance(value, str) and _INTEGER.fullmatch(value) else value


def _budget(value: Any) -> Any:
    """A token budget: a positive whole number, or unlimited (inf, "inf", None: attention stays dense)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("inf", "infinity", "none")):
        return math.inf
    if isinstance(value, float) and value == math.inf:
        return value
    value = _digits(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a positive whole number of tokens, or inf")
    if value <= 0:
        raise ValueError("must be a positive whole number of tokens, or inf")
    return value


# Put on a number field (`Annotated[Literal[2, 4, 16], NUMBER_TEXT]`) so that "4" is 4 there too.
NUMBER_TEXT = BeforeValidator(_digits)
# A whole number; text that spells one is accepted (strict otherwise: true and 4.0 are not numbers of tokens).
Whole = Annotated[int, NUMBER_TEXT]
# A token budget: a positive whole number, or math.inf for no limit.
Budget = Annotated[int | float, BeforeValidator(_budget)]


class CacheOptions(BaseModel):
    """A kind's options: unknown names refused, values strict (no silent bool -> int), numbers as text read."""

    model_config = ConfigDict(extra="forbid", strict=True)


def text_config(config: Any) -> Any:
    """The language model's config (a VLM's cache serves its language model)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def attention_refusal(config: Any) -> str | None:
    """Why a cache that keeps every token of every layer as plain attention keys cannot serve this model, or None.

    Sliding windows: transformers' configs say it two ways. Newer ones list `layer_types` per layer
    ("sliding_attention"); older ones carry `sliding_window`, which Qwen2-style configs apply only when
    `use_sliding_window` is true and Mistral-style configs (no such flag) always apply. So: a window is in use
    when a layer type says so, or when `sliding_window` is set and `use_sliding_window` is not false."""
    text = text_config(config)
    other = sorted({t for t in (getattr(text, "layer_types", None) or []) if t != "full_attention"})
    if other:
        return f"it has {', '.join(other)} layers (only full-attention layers are supported)"
    if getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True) is not False:
        return f"it uses a sliding window of {text.sliding_window} tokens"
    if not getattr(text, "num_hidden_layers", None):
        return "its config does not say how many layers it has (num_hidden_layers)"
    return None


@dataclass(frozen=True)
class CacheKind:
    """A kv-cache kind (kinds.Kind with `attach` as its verb); see the module's docstring."""

    name: str
    short: str
    Options: type[CacheOptions]
    attach: Callable[[Any, Any], Any]
    refuse: Callable[[Any], str | None] = attention_refusal


class QuantizedOptions(CacheOptions):
    """What both quantized kinds share (quantized_layer.QuantizedLayer): grouping, residual; each narrows `bits`."""

    bits: Whole = Field(2, description="bits per stored number")
    group: Whole = Field(32, ge=1, description="G, tokens per key group and channels per value group")
    residual: Whole | None = Field(None, ge=1, validate_default=True,
                                   description="R, recent tokens kept in full precision, a multiple of G (None: G)")

    @field_validator("residual")
    @classmethod
    def _whole_groups(cls, residual: int | None, info: ValidationInfo) -> int | None:
        group = info.data.get("group")
        if group is None:  # group itself was refused; that error says enough
            return residual
        if residual is None:
            return group
        if residual < group or residual % group:
            raise ValueError(f"must be a multiple of group ({group})")
        return residual

"""Hallucination-mitigated decoding for vision-language models, switched per run by `model.options.decoding`:
`vcd` (Visual Contrastive Decoding) and `shield` (SHIELD's three encoder-side defences). Both act through
transformers' own extension points, never a patched `generate`:

    decoding = prepare(model, processor, inputs, {"kind": "vcd"}, home)   # inputs: the processor's output
    with decoding.hooks():                                               # forward hooks, removed after the call
        out = model.generate(**inputs, logits_processor=decoding.logits_processor, ...)
    record["decoding"] = decoding.stats()        # {"kind", "settings", "extra_forward_passes", "seconds", ...}

Each kind is one module (imported lazily: validating costs no torch import) exposing
    OPTIONS                 its option names -> a description
    validate(options)       the options normalised; ValueError naming the field ("decoding.alpha: ...")
    build(model, processor, inputs, options, home) -> a session.Decoding
A call without an image (no pixel_values) is left alone: its stats say "skipped": "no image".
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from ... import spec

KINDS = {"vcd": "toolpath.policies.decoding.vcd", "shield": "toolpath.policies.decoding.shield"}


def kind_module(kind: str) -> ModuleType:
    """The module of a kind; ValueError naming the known kinds on an unknown one."""
    if kind not in KINDS:
        raise ValueError(f"decoding.kind: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return importlib.import_module(KINDS[kind])


def validate(setting: Any) -> dict[str, Any]:
    """`model.options.decoding` (a mapping with `kind`, or a kind's name alone) -> {"kind": ..., every option
    normalised}; ValueError naming the field. The spec validates through the same function."""
    return spec.decoding_setting(setting)


def prepare(model: Any, processor: Any, inputs: dict, setting: Any, home: Path | str):
    """The decoding for one generate call on `inputs` (input_ids, attention_mask, pixel_values, ...)."""
    from .session import Decoding

    options = validate(setting)
    kind = options.pop("kind")
    if inputs.get("pixel_values") is None:
        return Decoding(kind, options, skipped="no image")
    started = time.perf_counter()
    decoding = kind_module(kind).build(model, processor, inputs, options, Path(home))
    decoding.details.setdefault("prepare_seconds", round(time.perf_counter() - started, 4))
    return decoding

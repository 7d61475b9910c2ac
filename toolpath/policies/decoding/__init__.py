"""Hallucination-mitigated decoding for vision-language models, switched per run by `model.options.decoding`:
`vcd` (Visual Contrastive Decoding) and `shield` (SHIELD's three encoder-side defences). Both act through
transformers' own extension points, never a patched `generate`:

    chosen = setting({"kind": "vcd"})                     # the registered kind and its typed Options, checked once
    decoding = prepare(model, processor, inputs, chosen, home)   # inputs: the processor's output
    with decoding.hooks():                                      # forward hooks, removed after the call
        out = model.generate(**inputs, logits_processor=decoding.logits_processor, ...)
    record["decoding"] = decoding.stats()        # {"kind", "settings", "extra_forward_passes", "seconds", ...}

Each kind is a `decoder` of the registry: an object (`KIND` in its module; toolpath/kinds.py) with
    name, Options          its name and its options as a pydantic model (ranges as field constraints)
    build(model, processor, inputs, options, home) -> a session.Decoding
A call without an image (no pixel_values) is left alone: its stats say "skipped": "no image".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ... import kinds, registry


@dataclass(frozen=True)
class Setting:
    """A decoding kind and its validated Options: what a policy keeps from its spec for every call."""

    kind: Any
    options: BaseModel

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.name, **self.options.model_dump()}


def setting(value: Any) -> Setting:
    """`model.options.decoding` (a mapping with `kind`, or a kind's name alone) -> the registered kind and its
    Options; ValueError naming the field ("decoding.alpha: ...")."""
    known = registry.declared("decoder")
    if isinstance(value, str):
        value = {"kind": value.strip()}
    if not isinstance(value, dict):
        raise ValueError(f"decoding: expected a mapping with 'kind' or a kind's name ({', '.join(known)}), "
                         f"got {type(value).__name__}")
    name = value.get("kind")
    if name is None:
        raise ValueError(f"decoding.kind: missing; known: {', '.join(known)}")
    if name not in known:
        raise ValueError(f"decoding.kind: unknown kind {name!r}; known: {', '.join(known)}")
    kind = kinds.check_kind(registry.load("decoder", name), "decoder", name)
    return Setting(kind, kinds.options(kind, {k: v for k, v in value.items() if k != "kind"}, "decoding"))


def validate(value: Any) -> dict[str, Any]:
    """`model.options.decoding` -> {"kind": ..., every option normalised}; ValueError naming the field."""
    return setting(value).as_dict()


def prepare(model: Any, processor: Any, inputs: dict, chosen: Setting | dict | str, home: Path | str):
    """The decoding for one generate call on `inputs` (input_ids, attention_mask, pixel_values, ...); `chosen` is
    a Setting, or a spec's setting checked here."""
    from .session import Decoding

    if not isinstance(chosen, Setting):
        chosen = setting(chosen)
    if inputs.get("pixel_values") is None:
        return Decoding(chosen.kind.name, chosen.options, skipped="no image")
    started = time.perf_counter()
    decoding = chosen.kind.build(model, processor, inputs, chosen.options, Path(home))
    decoding.details.setdefault("prepare_seconds", round(time.perf_counter() - started, 4))
    return decoding

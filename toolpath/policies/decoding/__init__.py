"""Hallucination-mitigated decoding for vision-language models, switched per run by `model.options.decoding`:
`vcd` (Visual Contrastive Decoding) and `shield` (SHIELD's three encoder-side defences). Both act through
transformers' own extension points, never a patched `generate`:

    chosen = model_settings(spec).decoding     # policies/settings.py: the kind's name and typed Options, once
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
from pathlib import Path
from typing import Any

from ..settings import Setting, kind_of, setting


def prepare(model: Any, processor: Any, inputs: dict, chosen: Setting | dict | str, home: Path | str):
    """The decoding for one generate call on `inputs` (input_ids, attention_mask, pixel_values, ...); `chosen` is
    the model's decoding Setting (policies/settings.py, validated once), or a spec's setting validated here."""
    from .session import Decoding

    if not isinstance(chosen, Setting):
        chosen = setting("decoding", chosen)
    if inputs.get("pixel_values") is None:
        return Decoding(chosen.kind, chosen.options, skipped="no image")
    started = time.perf_counter()
    decoding = kind_of("decoder", chosen.kind).build(model, processor, inputs, chosen.options, Path(home))
    decoding.details.setdefault("prepare_seconds", round(time.perf_counter() - started, 4))
    return decoding

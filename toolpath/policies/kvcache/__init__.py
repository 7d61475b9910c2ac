"""KV caches every local transformers model can switch per run: quantized (`kivi`, `chanmix`) and sparse
(`quest`, `icecache`).

    cache = attach(model, "chanmix", bits=2)      # a transformers Cache, prepared for this model
    model.generate(**enc, cache=cache)            # or model(..., cache=cache)
    cache.nbytes()                                # bytes of the tensors it stores

Each kind is one module (imported lazily, so listing or validating costs no torch import) exposing
    OPTIONS                  its option names -> a description
    validate(options)        the options normalised; ValueError naming the field ("kv_cache.bits: ...")
    refuse(config)           why this kind cannot run with a model config (sliding windows...), or None
    attach(model, **options) a transformers Cache whose .nbytes() counts its stored tensors
On the CLI and in a spec the short form is `KIND[:N]`: N is the bits of a quantized kind, the token budget of
a sparse one (`parse_kv_cache`).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ... import spec

KINDS = {"kivi": "toolpath.policies.kvcache.kivi", "chanmix": "toolpath.policies.kvcache.chanmix",
         "quest": "toolpath.policies.kvcache.quest", "icecache": "toolpath.policies.kvcache.icecache"}


def kind_module(kind: str) -> ModuleType:
    """The module of a kind; ValueError naming the known kinds on an unknown one."""
    if kind not in KINDS:
        raise ValueError(f"kv_cache.kind: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return importlib.import_module(KINDS[kind])


def parse_kv_cache(text: str) -> dict[str, Any]:
    """`KIND[:N]` -> {"kind": KIND, "bits" or "budget": N}; "chanmix:2" -> {"kind": "chanmix", "bits": 2}."""
    return spec.parse_kv_cache(text)


def validate_kv_cache(value: Any) -> dict[str, Any]:
    """A spec's `model.options.kv_cache` (a mapping with `kind`, or `KIND[:N]`) -> {"kind": ..., its options
    normalised}; ValueError naming the field. The spec validates through the same function."""
    return spec.kv_cache_setting(value)


def refuse(kind: str, config: Any) -> str | None:
    """Why `kind` cannot run with this model config, or None; checked when the model loads."""
    return kind_module(kind).refuse(config)


def attach(model: Any, kind: str, **options: Any):
    """Prepare `model` for `kind` and return a fresh transformers Cache for one generate()/forward sequence."""
    module = kind_module(kind)
    settings = module.validate(options)
    reason = module.refuse(model.config)
    if reason:
        raise ValueError(f"kv_cache.kind: {kind} cannot run with this model: {reason}")
    return module.attach(model, **settings)

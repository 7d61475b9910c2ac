"""KV caches every local transformers model can switch per run: quantized (`kivi`, `chanmix`) and sparse
(`quest`, `icecache`), and any a plugin registers.

    cache = attach(model, "chanmix", {"bits": 2})   # a transformers Cache, prepared for this model
    model.generate(**enc, cache=cache)              # or model(..., cache=cache)
    cache.nbytes()                                  # bytes of the tensors it stores

Each kind is one module whose `KIND` (kind.CacheKind: name, short, Options, refuse, attach) the registry names
(`kv_cache` entries); its module imports no torch, so validating a setting or listing kinds stays light. The
layers live beside it, one module each (quantized_layer.py for the quantized kinds; sparse_layer.py, extended
by quest_layer.py and icecache_layer.py, for the sparse ones), and every kind returns the one Cache of cache.py.
A spec's setting (`KIND[:N]` or a mapping) is validated once, into the kind's Options, by policies/settings.py.
"""

from __future__ import annotations

from typing import Any

from ... import kinds


def attach(model: Any, kind: str, options: Any = None):
    """Prepare `model` for the registered kv-cache `kind` and return a fresh Cache for one generate()/forward
    sequence. `options` is the kind's Options (as settings.py made it) or a mapping, validated here."""
    from ..settings import kind_of

    found = kind_of("kv_cache", kind)
    if not isinstance(options, found.Options):
        options = kinds.options(found, dict(options or {}), "kv_cache")
    reason = refusal(found, model.config)
    if reason:
        raise ValueError(f"kv_cache.kind: {kind} cannot run with this model: {reason}")
    return found.attach(model, options)


def refusal(kind: Any, config: Any) -> str | None:
    """Why a kind cannot run with this model config, or None (a kind without `refuse` serves any model)."""
    refuse = getattr(kind, "refuse", None)
    return refuse(config) if refuse is not None else None


def held_bytes(cache: Any) -> int:
    """Bytes of the tensors a cache holds: its own count (`nbytes()`, which knows codes, scales and pages), or, for
    a plain transformers cache a plugin returns, its layers' keys and values."""
    if hasattr(cache, "nbytes"):
        return cache.nbytes()
    return sum(t.numel() * t.element_size() for layer in getattr(cache, "layers", ())
               for t in (getattr(layer, "keys", None), getattr(layer, "values", None)) if t is not None)

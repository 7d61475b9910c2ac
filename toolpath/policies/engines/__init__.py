"""Policy engines: what runs a local text model's forward passes. `torch` is transformers (hf.py, where the
research hooks live: kv caches, decoding methods); another engine (onnxruntime.py) runs the same folder exported
once (export.py), prompted by the same HFPolicy code, so templates, grammars, stop rules, token counts and
Response fields are the torch backend's. An engine is one `engine` entry of the registry whose target is its
`validate(options) -> options` (its typed `Options`), and whose module has `load(folder, spec, name) -> Policy`.
"""

from __future__ import annotations

import importlib

from ... import registry
from ..base import PolicyError

TORCH = "torch"
# Options only the torch backend honours: each is forward hooks or cache layers inside transformers' generate().
TORCH_ONLY = ("kv_cache", "decoding")


def kind_module(kind: str):
    """The module of an engine kind (its registry entry's target module)."""
    return importlib.import_module(registry.entry("engine", kind).target.partition(":")[0])


def engine_of(options: dict) -> str:
    """The engine a model's options choose (`torch` when none is named)."""
    setting = options.get("engine") or TORCH
    return setting["kind"] if isinstance(setting, dict) else setting


def load_engine_policy(folder, spec, name: str):
    """The policy of `spec` on its engine, over a checked local text-model folder."""
    kind = engine_of(spec.options)
    module = kind_module(kind)
    missing = module.missing()
    if missing:
        raise PolicyError(f"model.options.engine: {kind} is not installed ({missing})")
    return module.load(folder, spec, name)


def checked(options_model, options: dict) -> dict:
    """An engine's options through its typed model; ValueError naming each bad one as `engine.FIELD`."""
    from pydantic import ValidationError

    try:
        return options_model(**options).model_dump()
    except ValidationError as err:
        raise ValueError("; ".join(f"engine.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())) from None


def engines() -> list[tuple[str, str]]:
    """Each registered engine and whether it can run here (`models list`): (name, "" or what is missing)."""
    rows = []
    for kind in registry.declared("engine"):
        try:
            rows.append((kind, kind_module(kind).missing()))
        except ImportError as err:  # a plugin engine whose module cannot be imported
            rows.append((kind, f"cannot be imported: {err}"))
    return rows

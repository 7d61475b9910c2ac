"""Policy engines: what runs a local text model's forward passes. `torch` is transformers (hf.py, where the
research hooks live: kv caches, decoding methods); another engine (ort.py) runs the same folder exported
once (export.py), prompted by the same HFPolicy code, so templates, grammars, stop rules, token counts and
Response fields are the torch backend's. An engine is one `engine` entry of the registry, an object
(`KIND` in its module; toolpath/kinds.py) with

    name, Options                       its name and its options (`model.options.engine: {kind: NAME, ...}`)
    load(folder, spec, name, options)   a Policy over a checked local text-model folder; None when transformers
                                        (hf.py, which asked) runs it
    missing() -> str                    what is not installed for it here, "" when it can run (optional: an
                                        engine without it is taken to be installed)

When a run names no engine, the fast one runs the model if it is installed, nothing torch-only is asked and it
can run the folder; torch otherwise. The choice is said in one line when the model loads. TOOLPATH_ENGINE sets
that default for a whole process: `auto` (unset), or an engine's name, which runs every model that names none
(`torch`: the test suite pins it, so it exports no model).
"""

from __future__ import annotations

import os

from ... import registry
from ...progress import say
from ..base import PolicyError
from ..settings import TORCH, TORCH_ONLY, kind_of, model_settings, setting

# Options of torch's own weight quantizer (quant.py): a run that sets one asks for that quantizer's layout, so the
# default engine is torch for it (an engine quantizes its export its own way).
TORCH_WEIGHT_LAYOUT = ("lm_head", "int4_group")
ENGINE_VARIABLE = "TOOLPATH_ENGINE"
AUTO = "auto"
ONNXRUNTIME = "onnxruntime"
FAST = ONNXRUNTIME  # what `auto` tries first: the engine whose measured decode and prefill beat torch here


def engine_of(options: dict) -> str | None:
    """The engine a model's options name, or None when they name none (the default decides)."""
    setting = options.get("engine")
    if not setting:
        return None
    return setting["kind"] if isinstance(setting, dict) else setting


def default_engine() -> str:
    """TOOLPATH_ENGINE: `auto` (unset or empty) or a registered engine's name; PolicyError naming it otherwise."""
    value = os.environ.get(ENGINE_VARIABLE, "").strip() or AUTO
    known = registry.declared("engine")
    if value != AUTO and value not in known:
        raise PolicyError(f"{ENGINE_VARIABLE}={value!r}: expected {AUTO} or one of {', '.join(known)}")
    return value


def torch_asked(options: dict) -> str:
    """The first option that asks for torch (`model.options.kv_cache`), or ""."""
    for option in TORCH_ONLY + TORCH_WEIGHT_LAYOUT:
        if options.get(option):
            return f"model.options.{option}"
    return ""


def load_engine_policy(folder, spec, name: str):
    """The policy of `spec` over a checked local text-model folder when an engine other than torch runs it; None
    when torch does (hf.py loads it then). An engine the spec names refuses what it cannot run; the default one
    steps aside for torch, saying why."""
    kind = engine_of(spec.options)
    if kind is not None:
        return None if kind == TORCH else _load(kind, folder, spec, name)
    kind = default_engine()
    if kind == TORCH or (kind == AUTO and _not_installed(FAST)):
        return None  # torch by the user's (or the test suite's) choice, or the only engine here
    kind = FAST if kind == AUTO else kind
    why = torch_asked(spec.options)
    if why:
        say(f"{name} runs on engine torch: {why} needs it (engine {kind} otherwise)")
        return None
    try:
        policy = _load(kind, folder, spec, name)
    except PolicyError as err:
        # the engine's one-line refusal (or failed export), less its advice to name torch: torch is what runs it
        why = str(err).removeprefix("model.options.engine: ").removesuffix("; use engine torch")
        say(f"{name} runs on engine torch: {why}")
        return None
    say(f"{name} runs on engine {kind} (the default; --engine torch for transformers)")
    return policy


def _not_installed(name: str) -> str:
    check = getattr(kind_of("engine", name), "missing", None)
    return check() if callable(check) else ""


def _load(kind_name: str, folder, spec, model_name: str):
    missing = _not_installed(kind_name)
    if missing:
        raise PolicyError(f"model.options.engine: {kind_name} is not installed ({missing})")
    try:  # the engine the spec names, validated once; or the default's, with its default options
        chosen = model_settings(spec).engine or setting("engine", kind_name)
    except ValueError as err:  # a spec that came straight to the backend, not through policies.load
        raise PolicyError(str(err)) from None
    return kind_of("engine", kind_name).load(folder, spec, model_name, chosen.options)


def engines() -> list[tuple[str, str]]:
    """Each registered engine and whether it can run here (`models list`): (name, "" or what is missing)."""
    rows = []
    for kind in registry.declared("engine"):
        try:
            rows.append((kind, _not_installed(kind)))
        except (ImportError, ValueError) as err:  # a plugin engine that cannot be imported or is no engine
            rows.append((kind, f"cannot be imported: {err}"))
    return rows


def default_choice() -> str:
    """What runs a model whose run names no engine, said for `models list`."""
    try:
        kind = default_engine()
    except PolicyError as err:
        return str(err)
    if kind == AUTO and not _not_installed(FAST):
        return (f"{FAST} for a text model it can run when nothing torch-only is asked, torch otherwise "
                f"(--engine torch, or {ENGINE_VARIABLE}=torch for every run)")
    return f"{TORCH if kind == AUTO else kind} ({ENGINE_VARIABLE}={kind}; --engine NAME for one run)"

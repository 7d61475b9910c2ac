"""A model's kind settings, validated once: `model.options.engine`, `kv_cache` and `decoding`, each into the
Options of the kind the registry names for it.

spec.py (floor 0) only checks that a setting names a declared kind: the kinds' modules are on this floor and
above, and a spec is read before any of them may be imported. Here each setting becomes a `Setting` (the
kind's name and its typed Options), and the rules between settings are checked (kv caches and decoding methods
are hooks inside transformers' generate(), so they need engine torch). A ModelSpec remembers what it was
validated into, so the episode's check, `policies.load` and the backend read one validation.

    settings = model_settings(spec.model)          # ValueError "model.options.kv_cache.bits: ..."
    settings.kv_cache.kind, settings.kv_cache.options.bits
    settled(task_spec)                             # the spec with every model's settings written in full

Setting forms: a mapping with `kind`, or text: `KIND[:N]` for a kv cache (N sets the kind's `short` option,
bits or budget; `inf` an unlimited budget), a kind's name for a decoder or an engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .. import kinds, registry
from ..graph_spec import GraphSpecError, read_graph
from ..spec import KIND_OPTIONS, declared_kind, node_model

# model.options name -> the registry kind its value names
FAMILY = KIND_OPTIONS
# Options only the torch backend honours: each is forward hooks or cache layers inside transformers' generate().
TORCH_ONLY = ("kv_cache", "decoding")
TORCH = "torch"


@dataclass(frozen=True)
class Setting:
    kind: str
    options: BaseModel  # the kind's Options

    def dump(self) -> dict[str, Any]:
        """{"kind": ..., every option}: how the setting is stored with a run."""
        return {"kind": self.kind, **self.options.model_dump()}


@dataclass(frozen=True)
class ModelSettings:
    engine: Setting | None = None
    kv_cache: Setting | None = None
    decoding: Setting | None = None

    def written(self, options: dict[str, Any]) -> dict[str, Any]:
        """`options` with each kind setting in full (defaults filled in), so a resumed run runs the same."""
        out = dict(options)
        for option in FAMILY:
            found = getattr(self, option)
            if found is not None:
                out[option] = found.dump()
        return out


def kind_of(registry_kind: str, name: str, field: str | None = None) -> Any:
    """The registered kind `name` (checked to be a Kind of its family); ValueError naming `field`.kind and the
    known kinds when there is none."""
    field = field or kinds.FAMILIES[registry_kind].field
    known = registry.declared(registry_kind)
    if name not in known:
        raise ValueError(f"{field}.kind: unknown kind {name!r}; known: {', '.join(known) or 'none'}")
    try:
        found = registry.load(registry_kind, name)
    except registry.RegistryError as err:
        raise ValueError(f"{field}.kind: {err}") from None
    try:
        return kinds.check_kind(found, registry_kind, name)
    except kinds.NotAKind as err:  # its words name the family's field; say it where the setting is
        raise ValueError(field + str(err).removeprefix(kinds.FAMILIES[registry_kind].field)) from None


def setting(option: str, value: Any, field: str | None = None) -> Setting:
    """One model option (`kv_cache`, `decoding`, `engine`) validated into its kind's Options; ValueError whose
    every problem names `field` (default the option's own name), e.g. "kv_cache.bits: Input should be ..."."""
    field = field or option
    registry_kind = FAMILY[option]
    name, values = _read(option, value, field)
    return Setting(name, kinds.options(kind_of(registry_kind, name, field), values, field))


def _read(option: str, value: Any, field: str) -> tuple[str, dict[str, Any]]:
    """(kind name, its options as given) from a mapping with `kind` or the option's text form."""
    name = declared_kind(option, value, field)
    if isinstance(value, dict):
        return name, {k: v for k, v in value.items() if k != "kind"}
    _, sep, number = value.partition(":")
    if not sep:
        return name, {}
    short = getattr(kind_of(FAMILY[option], name, field), "short", None)
    if not short:
        raise ValueError(f"{field}: {name} takes no value after '{name}:'; give its options as a mapping")
    return name, {short: number.strip()}


def model_settings(model: Any, at: str = "model.") -> ModelSettings:
    """A ModelSpec's kind settings, validated (once per ModelSpec and options); ValueError naming the field
    under `at` ("model.options.kv_cache.bits: ..."; a policy node's model is `agent.params.nodes.NAME.model.`;
    with `at` empty, as a command-line flag sets it: "kv_cache.bits: ...")."""
    key = json.dumps(model.options, sort_keys=True, default=str)
    remembered = model._settings
    if remembered is not None and remembered[0] == key:
        return remembered[1]
    found = {option: setting(option, model.options[option], f"{at}options.{option}" if at else option)
             for option in FAMILY if model.options.get(option)}
    engine = found["engine"].kind if "engine" in found else None
    for option in TORCH_ONLY:
        if engine not in (None, TORCH) and option in found:
            raise ValueError(f"{at}options.{option} needs options.engine torch; options.engine is {engine}")
    settings = ModelSettings(**found)
    model._settings = (key, settings)
    return settings


def settled_model(model: Any, at: str = "model.") -> Any:
    """A copy of the ModelSpec with its settings validated and written in full (remembered, so the backend that
    loads it does not validate them again)."""
    settings = model_settings(model, at)
    out = model.model_copy(update={"options": settings.written(model.options)})
    out._settings = (json.dumps(out.options, sort_keys=True, default=str), settings)
    return out


def settled(spec: Any) -> Any:
    """A copy of the TaskSpec whose model, and each graph node's own model, has its settings validated and written
    in full: where an episode starts, before anything runs, so a bad option is the spec's error naming its field,
    and the stored spec says exactly what ran. ValueError at the first bad setting."""
    out = spec.model_copy(deep=True)
    out.model = settled_model(out.model)
    for name, model in node_models(out):
        options = settled_model(model, f"agent.params.nodes.{name}.model.").options
        node = out.agent.params["nodes"][name]
        if options:  # a node's model written as a name alone has none to write out
            node["model"] = {**(node["model"] if isinstance(node["model"], dict) else {"name": node["model"]}),
                             "options": options}
    return out


def node_models(spec: Any) -> list[tuple[str, Any]]:
    """(node name, its own ModelSpec) for each policy node of an `agent: graph` spec that names a model."""
    if spec.agent.name != "graph":
        return []
    try:
        nodes = read_graph(spec.agent.params)["nodes"]
    except GraphSpecError:  # a graph that cannot be read has no node to run; parse_spec names its problem
        return []
    return [(name, node_model(name, node["model"])) for name, node in nodes.items()
            if node["kind"] == "policy" and "model" in node]


def described(registry_kind: str) -> list[dict[str, Any]]:
    """Each registered kind of a family with how it is written and its options (kinds.describe), for `models list`
    and the docs; a kind that cannot be loaded is listed with why. Imports the kinds' modules, never torch."""
    rows = []
    for name, entry in registry.declared(registry_kind).items():
        row = {"name": name, "source": entry.source, "form": name, "options": {}, "error": ""}
        try:
            found = kind_of(registry_kind, name)
        except ValueError as err:
            rows.append({**row, "error": str(err)})
            continue
        short = getattr(found, "short", None)
        options = kinds.describe(found)
        first = {short: options.pop(short)} if short in options else {}  # what N of KIND:N sets, first
        row.update(form=f"{name}[:{short.upper()}]" if short else name, options={**first, **options})
        rows.append(row)
    return rows

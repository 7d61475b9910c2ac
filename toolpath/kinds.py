"""What a pluggable kind of the model side is: a small typed object the registry names.

A kv cache, a decoding method, an engine or a compressor is one object (conventionally `KIND` in its module,
the registry's target) with

    name      the name it is registered under
    Options   a pydantic model of its options; ranges, choices and budgets are field constraints, unknown
              options are refused (`extra="forbid"`)

and its family's one verb (`Family.verb` below). A kind written outside the package is the same object behind
a `KIND:NAME=module:attr` plugin entry, so it is validated and run exactly as the built-in ones are.

`options(kind, values, field)` is the one place a mapping becomes a kind's Options: a bad value is a single
ValueError naming the field as a spec writes it, "kv_cache.bits: Input should be 2, 4 or 16 (got 3)".

Floor 0: pydantic and spec's error wording only; a kind's module is never imported from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from .spec import error_message
from .spec_reading import field_path  # spec's wording: a kind's bad option reads like any other spec error


@runtime_checkable
class Kind(Protocol):
    name: str
    Options: type[BaseModel]


@dataclass(frozen=True)
class Family:
    """A registry kind whose entries are Kind objects, and the verb each of them has."""

    registry_kind: str  # the registry's kind ("kv_cache", "decoder", "engine", "compressor")
    field: str  # how a spec names the setting ("kv_cache", "decoding", "engine", "compress")
    verb: str  # the method every kind of the family has besides name and Options


FAMILIES = {f.registry_kind: f for f in (
    Family("kv_cache", "kv_cache", "attach"),
    Family("decoder", "decoding", "build"),
    Family("engine", "engine", "load"),
    Family("compressor", "compress", "compress"),
)}


class NotAKind(ValueError):
    """A registered object that lacks what its family needs (a plugin written against another shape)."""


def check_kind(obj: Any, registry_kind: str, name: str) -> Any:
    """`obj` if it is a Kind of that family; NotAKind naming what is missing otherwise."""
    family = FAMILIES[registry_kind]
    options_model = getattr(obj, "Options", None)
    missing = [part for part, ok in (
        ("name", isinstance(getattr(obj, "name", None), str)),
        ("Options (a pydantic model)", isinstance(options_model, type) and issubclass(options_model, BaseModel)),
        (family.verb, callable(getattr(obj, family.verb, None))),
    ) if not ok]
    if missing:
        noun = registry_kind.replace("_", " ")
        article = "an" if noun[0] in "aeiou" else "a"
        raise NotAKind(f"{family.field}.kind: {name!r} is registered as {article} {noun} but has no "
                       f"{', no '.join(missing)}")
    return obj


def options(kind: Kind, values: dict[str, Any], field: str) -> BaseModel:
    """`values` validated into the kind's Options; one ValueError naming every bad field as `field.name: why`."""
    return validated(kind.Options, values, field, kind.name)


def validated(model: type[BaseModel], values: Any, field: str, owner: str) -> BaseModel:
    """`values` validated into `model` (any options model: a kind's, an agent's params, a sandbox's options);
    one ValueError naming every bad field under `field` ("agent.params.max_steps: ..."), an unknown one with
    what `owner` takes instead."""
    try:
        return model.model_validate(values)
    except ValidationError as err:
        raise ValueError("; ".join(_problem(e, model, field, owner) for e in err.errors())) from None


def _problem(error: dict, model: type[BaseModel], field: str, owner: str) -> str:
    where = field_path((field, *error["loc"]))
    if error["type"] == "extra_forbidden":
        known = ", ".join(model.model_fields) or "none"
        return f"{where}: {owner} has no option {error['loc'][-1]!r}; its options: {known}"
    return f"{where}: {error_message(error)}"


def describe(kind: Kind) -> dict[str, str]:
    """Each option of the kind -> its description and default, for `models list` and the docs."""
    out = {}
    for name, info in kind.Options.model_fields.items():
        parts = [info.description or ""]
        if not info.is_required():
            parts.append(f"default {info.get_default(call_default_factory=True)!r}")
        out[name] = "; ".join(p for p in parts if p)
    return out

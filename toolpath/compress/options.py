"""`--option KEY=VALUE` values of a compression method, read against the method's defaults (their types)."""

from __future__ import annotations

from typing import Any


def read_options(given: dict[str, str], defaults: dict[str, Any]) -> dict[str, Any]:
    """The defaults overridden by `given`, each converted to its default's type; an unknown key or a value of the
    wrong kind is a ValueError naming the option. A default of None takes the text as it is."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"unknown option {', '.join(unknown)}; options of this method: "
                         f"{', '.join(sorted(defaults)) or 'none'}")
    out = dict(defaults)
    for key, text in given.items():
        kind = type(defaults[key])
        try:
            if kind is bool:
                if text.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError
                out[key] = text.lower() in ("1", "true", "yes", "on")
            elif kind is int:
                out[key] = int(text)
                if out[key] <= 0:
                    raise ValueError
            elif kind is float:
                out[key] = float(text)
            else:
                out[key] = text
        except ValueError:
            expect = {bool: "true or false", int: "a positive whole number", float: "a number"}.get(kind, "text")
            raise ValueError(f"option {key}={text!r}: expected {expect}") from None
    return out

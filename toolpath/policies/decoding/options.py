"""Checking a decoding kind's options: each error names the field as a spec writes it (`decoding.alpha: ...`)."""

from __future__ import annotations

import math
from typing import Any


def known_only(options: dict[str, Any], allowed: dict[str, str], kind: str) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"decoding.{unknown[0]}: {kind} has no option {unknown[0]!r}; its options: "
                         f"{', '.join(allowed)}")


def number(options: dict[str, Any], name: str, default: float, *, above: float | None = None,
           at_least: float | None = None, at_most: float | None = None) -> float:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"decoding.{name}: expected a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"decoding.{name}: expected a finite number, got {value}")
    if above is not None and value <= above:
        raise ValueError(f"decoding.{name}: must be > {above:g}, got {value:g}")
    if at_least is not None and value < at_least:
        raise ValueError(f"decoding.{name}: must be >= {at_least:g}, got {value:g}")
    if at_most is not None and value > at_most:
        raise ValueError(f"decoding.{name}: must be <= {at_most:g}, got {value:g}")
    return value


def integer(options: dict[str, Any], name: str, default: int, *, minimum: int | None = None,
            maximum: int | None = None) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"decoding.{name}: expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"decoding.{name}: must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"decoding.{name}: must be at most {maximum}, got {value}")
    return value


def boolean(options: dict[str, Any], name: str, default: bool) -> bool:
    value = options.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"decoding.{name}: expected true or false, got {value!r}")
    return value


def text(options: dict[str, Any], name: str, default: str | None, *, max_chars: int = 4096) -> str | None:
    value = options.get(name, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"decoding.{name}: expected a non-empty string, got {value!r}")
    if len(value) > max_chars:
        raise ValueError(f"decoding.{name}: at most {max_chars} characters, got {len(value)}")
    return value


def choice(options: dict[str, Any], name: str, default: str, choices: tuple[str, ...]) -> str:
    value = options.get(name, default)
    if value not in choices:
        raise ValueError(f"decoding.{name}: must be one of {', '.join(choices)}, got {value!r}")
    return value

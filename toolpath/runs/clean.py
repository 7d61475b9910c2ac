"""What the store writes: every text and JSON document, cleaned by one set of rules before it is stored.

Whatever a model produced, a write must neither fail (that would lose the step, or fail the checkpoint the
step commits with) nor store something its readers reject: the viewer's browser and `runs show --json` parse
strict JSON, PostgreSQL and every UTF-8 reader refuse invalid text. So before anything is written:
  - a float that is not finite (NaN, Infinity) becomes null, as JavaScript's JSON.stringify writes it: JSON
    has no such numbers, and a string in their place would break code that expects a number there;
  - a lone surrogate (half a UTF-16 pair: UTF-8 cannot encode it) or a NUL (PostgreSQL text cannot hold it)
    becomes U+FFFD, the replacement character; a well-formed surrogate pair becomes its character;
  - a value JSON has no type for (bytes, a complex number, a set, any object) becomes its repr(), a path its
    text, and nesting deeper than MAX_DEPTH a note saying so (deeper, json.dumps itself would recurse out);
  - every secret toolpath.redact knows is replaced by its mark, whatever path it reached the store by; only
    identifiers (ids, names of tasks, samples, nodes) are not redacted, as they must read back as written.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

from ..redact import redactor

MAX_DEPTH = 100
_BAD_TEXT = {0: "\ufffd"}  # str.translate table for NUL; surrogates are handled by the UTF-16 round trip


def valid_text(text: str) -> str:
    if not isinstance(text, str):
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # surrogates: pairs become their character, lone halves U+FFFD
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.translate(_BAD_TEXT) if "\x00" in text else text


def clean_text(text: Any, redact_text: Callable[[str], str] | None = None) -> str | None:
    """A text column's value as the store writes it: valid text, secrets redacted (None stays None)."""
    if text is None:
        return None
    return (redact_text or redactor())(valid_text(text if isinstance(text, str) else str(text)))


def clean_data(value: Any, redact_text: Callable[[str], str] | None = None, depth: int = 0) -> Any:
    """`value` made of JSON types only, with the rules above applied to every string and number in it."""
    redact_text = redact_text or redactor()
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return clean_text(value, redact_text)
    if depth >= MAX_DEPTH:
        return f"[nested deeper than {MAX_DEPTH} levels: not stored]"
    if isinstance(value, dict):
        return {_clean_key(k, redact_text): clean_data(v, redact_text, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_data(v, redact_text, depth + 1) for v in value]
    if isinstance(value, os.PathLike):
        return clean_text(os.fspath(value), redact_text)
    return clean_text(_repr(value), redact_text)


def _clean_key(key: Any, redact_text: Callable[[str], str]) -> str:
    return clean_text(key if isinstance(key, str) else _repr(key), redact_text)


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as err:  # noqa: BLE001 — an object whose repr fails is still stored, as what it is
        return f"<{type(value).__name__} object: repr failed with {type(err).__name__}>"


def to_json(value: Any, compact: bool = False) -> str:
    """`value` as the strict JSON text the store writes (clean_data's rules; never NaN, never a failure)."""
    return json.dumps(clean_data(value), ensure_ascii=False, allow_nan=False,
                      separators=(",", ":") if compact else None)


def json_text(text: str) -> str:
    """A JSON document given as text (a run's spec), cleaned by the same rules, or as text if it is not JSON."""
    try:
        return to_json(json.loads(text), compact=True)
    except (ValueError, RecursionError):
        return clean_text(text)


def finite_or(x: Any, default: float | None) -> float | None:
    return x if x is None or (isinstance(x, (int, float)) and math.isfinite(x)) else default


"""webarena-verified's AgentResponseEvaluator as published (the `webarena-verified` package), for
scoring="official": its parsing, normalisation and comparison rules, its known bugs included.

    agent_response(cfg, answer, release=CURRENT) -> {"type", "score", "items", "release"}

Two releases are reproduced; their evaluators differ only in how they treat a missing or null retrieved_data
(every value reader and comparison is the same in both):
  1.2.3 (CURRENT, the default) - an answer without a retrieved_data key reads as null, so a MUTATE / NAVIGATE
        answer without it passes; a RETRIEVE task whose expected status is an error (NOT_FOUND_ERROR …,
        retrieved_data null) passes an answer with that status and no data, and fails one with data.
  1.0.0 - those two are bugs: an answer without the key leaves it out of the compared keys, so no answer
        without it passes; a RETRIEVE task whose expected status is an error raises "Expected retrieved_data
        must be set" for every parsed answer, so no answer passes it.
`check_release` names the releases; the chosen one is returned with every result, so a score says which
release gave it.

Bugs of both releases, each reproduced where named, with the case that shows it:
  - a JSON object inside prose is not read (only the whole answer or a ``` block is parsed);
  - task_type / status that are not strings (null, a number) raise, and the task scores 0;
  - an answer's value that is itself a list of two or more values is taken as alternatives: ["#170", "#189"]
    for one expected order number passes;
  - an answer's string that looks like a pattern ("^.*$") is matched against the expected value as one.
Each value type reads and compares values as the package's does (webarena_verified_values: durations through
pytimeparse2, distances through pint, coordinates through geopy, amounts through price-parser, numbers in words
through word2number, location names by thefuzz's token-sort ratio, git URLs, booleans, months and dates through
dateutil).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .webarena_result import result as _result
from .webarena_verified_values import EDGE_PUNCTUATION, READERS, is_pattern, prepare_text, same

RELEASES = ("1.0.0", "1.2.3")
CURRENT = "1.2.3"


def check_release(release: Any, where: str = "release") -> str:
    """The release, or a ValueError naming where it was given and the releases there are."""
    if release not in RELEASES:
        raise ValueError(f"{where}: the webarena-verified release to score as must be one of "
                         f"{', '.join(RELEASES)}, got {release!r}")
    return release


class _Bad(Exception):
    """A value the package's normaliser rejects (it raises; strict for expected values, raw for answers)."""


_TYPES = READERS


class Value:
    """A normalised value with its alternatives (a list of 2+ raw values), compared as the package does."""

    def __init__(self, kind: str, raw: Any):
        self.kind = kind
        if kind == "coordinates" and isinstance(raw, (list, tuple)) and len(raw) == 2 and \
                all(isinstance(v, (int, float, str)) for v in raw):
            self.alts = (self._one(raw),)  # [lat, lon] is one value, not two alternatives
        elif isinstance(raw, (list, tuple)):
            if len(raw) < 2:  # the package refuses a one-item list as alternatives
                raise _Bad("alternatives need 2+ items")
            self.alts = tuple(self._one(v) for v in raw)
        else:
            self.alts = (self._one(raw),)

    def _one(self, v: Any) -> Any:
        if isinstance(v, str):
            v = prepare_text(self.kind, v)
        if self.kind == "string":
            return "" if not v else str(v).strip() if is_pattern(v) else str(v).lower().strip()
        try:
            return _TYPES[self.kind](v)
        except Exception as err:  # noqa: BLE001 - the package catches every error of a type's reader
            raise _Bad(f"{self.kind}: {err}") from err

    def equals(self, other: Any) -> bool:
        if self.kind == "string" and isinstance(other, str) and not isinstance(other, Value):
            try:
                other = Value("string", other)  # the package normalises a raw string on the fly
            except _Bad:
                return False
        if not isinstance(other, Value) or other.kind != self.kind:
            return False
        if self.kind == "string":
            for a, b in ((x, y) for x in self.alts for y in other.alts):
                for pattern, text in ((a, b), (b, a)):
                    if is_pattern(pattern):
                        try:
                            if re.fullmatch(pattern, text, re.IGNORECASE):
                                return True
                        except re.error:
                            pass
            if set(self.alts) & set(other.alts):
                return True
            return bool({a.strip(EDGE_PUNCTUATION) for a in self.alts}
                        & {b.strip(EDGE_PUNCTUATION) for b in other.alts})
        return same(self.kind, self.alts, other.alts)


def _kind(schema: Any) -> Any:
    """(type name or object schema, is_array), as the package's _extract_type_from_schema."""
    if not isinstance(schema, dict):
        raise _Bad("schema")
    if schema.get("type") == "array":
        return _kind(schema.get("items", {}))[0], True
    if schema.get("type") == "object":
        return schema, False
    return schema.get("format") or schema.get("type") or "string", False


def _known(kind: str) -> str:
    if kind != "string" and kind not in _TYPES:
        raise _Bad(f"unknown type {kind!r}")
    return kind


def _object(obj: Any, schema: dict, strict: bool) -> Any:
    if isinstance(obj, str):
        try:
            parsed = json.loads(obj)
            obj = parsed if isinstance(parsed, dict) else obj
        except json.JSONDecodeError:
            pass
    if not isinstance(obj, dict):
        if strict:
            raise _Bad("not an object")
        return obj
    props, out = schema.get("properties", {}), {}
    for name, raw in obj.items():
        if raw is None:
            out[name] = None
            continue
        try:
            if name not in props:
                out[name] = Value("string", raw)
                continue
            kind, is_array = _kind(props[name])
            if is_array:
                out[name] = _array(raw, kind, strict)
            elif isinstance(kind, dict):
                out[name] = _object(raw, kind, strict)
            else:
                out[name] = Value(kind if kind in _TYPES else "string", raw)
        except (_Bad, ValueError, TypeError):
            if strict:
                raise
            out[name] = raw
    return out


def _array(value: Any, kind: Any, strict: bool) -> Any:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
            value = parsed if isinstance(parsed, list) else value
        except json.JSONDecodeError:
            pass
    elif not isinstance(value, (list, tuple)):
        if strict:
            raise _Bad("not an array")
        return value
    if isinstance(kind, dict):
        return tuple(_object(v, kind, strict) for v in value) if isinstance(value, (list, tuple)) \
            else _object(value, kind, strict)
    out = []
    for item in value:
        try:
            out.append(Value(_known(kind), item))
        except (_Bad, ValueError, TypeError):
            if strict:
                raise
            out.append(item)
    return tuple(out)


def _retrieved(raw: Any, schema: Any, strict: bool) -> Any:
    if not raw and not isinstance(raw, (int, float, bool)):
        return None
    items = tuple(raw) if isinstance(raw, (list, tuple)) else (raw,)
    if not isinstance(schema, dict) or schema.get("type", "array") != "array":
        raise _Bad(f"results schema is not an array: {schema!r}")
    item_schema = schema.get("items", {})
    if item_schema.get("type", "string") == "object":
        return tuple(_object(v, item_schema, strict) if not isinstance(v, (list, tuple))
                     else tuple(_object(o, item_schema, strict) for o in v) for v in items)
    out = []
    for item in items:
        try:
            out.append(Value(_known(item_schema.get("format") or item_schema.get("type", "string")), item))
        except (_Bad, ValueError, TypeError):
            if strict:
                raise
            out.append(item)
    return tuple(out)


def _equal(actual: Any, expected: Any, ordered: bool) -> bool:
    """The package's ValueComparator: dispatched on the expected value's shape."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, dict):
        return isinstance(actual, dict) and set(actual) == set(expected) and \
            all(_equal(actual[k], expected[k], ordered) for k in expected)
    if isinstance(expected, tuple):
        if not isinstance(actual, (list, tuple)):
            return False
        if ordered:
            return len(actual) == len(expected) and all(_equal(a, e, ordered) for a, e in zip(actual, expected))
        used = [False] * len(actual)  # greedy: each expected item takes the first unused actual that matches
        for e in expected:
            j = next((j for j, a in enumerate(actual) if not used[j] and _equal(a, e, ordered)), None)
            if j is None:
                return False
            used[j] = True
        return all(used)
    return expected.equals(actual) if isinstance(expected, Value) else expected == actual


def _parse(answer: Any) -> Any:
    value = answer.strip() if isinstance(answer, str) else answer
    if isinstance(answer, str):
        m = re.search(r"```(?:json)?\s*\n?(.*?)\n?```", answer, re.DOTALL)
        if m:
            value = m.group(1).strip()
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    return value or None


def agent_response(cfg: dict, answer: Any, release: str = CURRENT) -> dict:
    release = check_release(release)
    fixed = release != "1.0.0"  # the two null retrieved_data bugs (module docstring) are fixed after 1.0.0
    expected = cfg.get("expected") or {}
    schema = cfg.get("results_schema")

    def scored(score: float, items: list) -> dict:
        return {**_result("AgentResponseEvaluator", score, items), "release": release}

    try:
        kind = Value("string", expected.get("task_type"))
        is_retrieve = str(expected.get("task_type", "")).lower() == "retrieve"
        want = {"task_type": kind, "status": Value("string", expected.get("status")),
                "retrieved_data": _retrieved(expected.get("retrieved_data"), schema, strict=True)}
    except (_Bad, ValueError, TypeError) as err:
        return scored(0.0, [{"error": f"expected value unreadable: {err}"}])
    got = _parse(answer)
    if not isinstance(got, dict):
        return scored(0.0, [{"error": "the answer is not a JSON object"}])
    try:
        have: dict[str, Any] = {}
        for key in [k for k in ("task_type", "status", "retrieved_data") if k in expected]:
            name = "performed_operation" if key == "task_type" and key not in got and "performed_operation" in got \
                else key
            if name not in got:
                if key == "retrieved_data" and fixed:
                    have[key] = None  # read as null; 1.0.0 leaves the key out and the key sets then differ
                continue
            if key == "retrieved_data":
                have[key] = _retrieved(got.get(key, ""), schema, strict=False) if is_retrieve else None
                continue
            text = got.get(name, "").strip()  # a null or a number here raises in the package: the task fails
            normalised: Any = None
            if text:
                try:
                    normalised = Value("string", text)
                except _Bad:
                    normalised = text
            have[key] = normalised or None
    except (AttributeError, _Bad, ValueError, TypeError) as err:  # the package's evaluation errors: the task fails
        return scored(0.0, [{"error": f"the package raises on this answer: {err}"}])
    ok = set(have) == set(want) and all(_equal(have[k], want[k], False) for k in ("task_type", "status"))
    items: list[dict] = [{"task_type/status": ok}]
    if is_retrieve and have:
        have_data, want_data = have.get("retrieved_data"), want["retrieved_data"]
        if want_data is None:
            if not fixed:  # 1.0.0 raises: a RETRIEVE task with an error status never passes
                return scored(0.0, items + [{"error": "Expected retrieved_data must be set"}])
            data_ok = have_data is None  # no data expected: an answer with some fails
        else:
            data_ok = have_data is not None and _equal(have_data, want_data, bool(cfg.get("ordered")))
        items.append({"retrieved_data": expected.get("retrieved_data"), "got": got.get("retrieved_data"),
                      "score": float(data_ok)})
        ok = ok and data_ok
    return scored(float(ok), items)

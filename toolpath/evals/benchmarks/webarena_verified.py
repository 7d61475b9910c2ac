"""WebArena-Verified's evaluators (ServiceNow's webarena-verified schema), offline.

    agent_response(cfg, answer)        AgentResponseEvaluator: task type, status and, for RETRIEVE tasks,
                                       the retrieved data, each value normalised by its schema's format
    network_event(cfg, final_state)    NetworkEventEvaluator, for the checks a visited URL can settle

webarena_eval.evaluate is the entry point: it dispatches a list-shaped eval block here.

This is scoring="toolpath": each value is read by our reader first and, where that cannot read it, by the
package's (webarena_verified_values); durations, distances, amounts and location names compare with the
tolerances of _TOLERANCE. webarena_eval's docstring lists where this differs from the package, case by case.
"""

from __future__ import annotations

import calendar
import json
import re
import urllib.parse
from datetime import datetime
from typing import Any

from . import webarena_verified_values as values
from .webarena_result import result as _result
from .webarena_verified_values import is_pattern


def _parse_response(answer: str | None) -> dict | None:
    """The agent's JSON response object (bare or in a ``` block), else None."""
    if not isinstance(answer, str):
        return answer if isinstance(answer, dict) else None
    text = answer.strip()
    m = re.search(r"```(?:json)?\s*\n?(.*?)\n?```", text, re.DOTALL)
    if m:
        text = m.group(1).strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        m = re.search(r"\{.*\}", text, re.DOTALL)  # a JSON object inside prose
        try:
            value = json.loads(m.group(0)) if m else None
        except json.JSONDecodeError:
            value = None
    return value if isinstance(value, dict) else None


def _number(v: Any) -> float:
    if isinstance(v, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(v, (int, float)):
        return float(v)
    s = re.sub(r"[,$€£\s]|usd", "", str(v).strip().lower())
    try:
        return float(s)
    except ValueError:
        if re.search(r"\d", str(v)):  # "6 and 7" is not read as words
            raise
        return float(_official("number", v))  # "six", "one hundred and five"


def _official(kind: str, v: Any) -> Any:
    """The package's reading of a value our own reader cannot read (webarena_verified_values)."""
    return values.read(kind, values.prepare_text(kind, v) if isinstance(v, str) else v)


_DECIMAL_COMMA = re.compile(r"\d,\d{1,2}(?!\d)")


def _currency(v: Any) -> tuple:
    """An amount, to the cent. A decimal comma ("36,39 €") and an amount in words around it ("Total: $36.39",
    "36.39 dollars") are read as the package reads them; "36,390" is thirty-six thousand, not 36.39."""
    if isinstance(v, str) and _DECIMAL_COMMA.search(v) and "." not in v:
        return ("≈", "currency", float(_official("currency", v)))
    try:
        return ("≈", "currency", _number(v))
    except ValueError:
        return ("≈", "currency", float(_official("currency", v)))


_UNITS_S = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hr": 3600, "hour": 3600,
            "d": 86400, "day": 86400}
_UNITS_M = {"m": 1, "meter": 1, "metre": 1, "km": 1000, "kilometer": 1000, "kilometre": 1000, "mi": 1609.344,
            "mile": 1609.344, "ft": 0.3048, "foot": 0.3048, "feet": 0.3048}


_RANGE = re.compile(r"\d\s*(?:[-\u2010-\u2015]|to)\s*\d")


def _quantity(v: Any, units: dict) -> float:
    if _RANGE.search(str(v)):  # "7-8 min" hedges between two values: it is neither
        raise ValueError(f"a range: {v!r}")
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", str(v).lower().replace(",", ""))
    if not parts:
        raise ValueError(f"no quantity in {v!r}")
    total = 0.0
    for num, unit in parts:
        u = unit if unit in units else unit.rstrip("s")
        if u not in units:
            raise ValueError(f"unknown unit {unit!r}")
        total += float(num) * units[u]
    return round(total, 3)


def _duration(v: Any) -> tuple:
    """Seconds; clock notation ("00:07:00", "5:47 hours") and what our units miss are read as the package does."""
    if ":" in str(v):
        return ("≈", "duration", float(_official("duration", v)))
    try:
        return ("≈", "duration", _quantity(v, _UNITS_S))
    except ValueError:
        return ("≈", "duration", float(_official("duration", v)))


def _distance(v: Any) -> tuple:
    """Metres; units our table lacks ("818 yards", "74800 cm", "914k") are read as the package reads them."""
    try:
        return ("≈", "distance", _quantity(v, _UNITS_M))
    except ValueError:
        return ("≈", "distance", float(_official("distance", v)))


# Two read values of a kind that compares with a tolerance: a duration within max(1 minute, 5 %) (a route time
# rounded to its unit: "0.12 hours" for 7 min, "6h" for 5h 47min; the package's max(3 minutes, 10 %) passes
# "10 min" for 7 min), a distance within max(10 m, 2 %) as the package (a map's route lengths vary by that
# much), an amount to the cent, a location name at a token-sort ratio of 80 as the package ("El Gallo de Oro."
# and "Carnegie Mellon Univ" are the place asked for).
_TOLERANCE = {"duration": lambda a, b: abs(a - b) <= max(60.0, 0.05 * max(a, b)),
              "distance": lambda a, b: abs(a - b) <= max(10.0, 0.02 * max(a, b)),
              "currency": lambda a, b: abs(a - b) < 0.005,
              "location-name": lambda a, b: values.same("location-name", (a,), (b,))}


_DATE_FORMATS = ("%B %d, %Y", "%B %d %Y", "%b %d, %Y", "%b %d %Y", "%Y-%m-%d", "%m/%d/%Y", "%d %B %Y", "%B %Y",
                 "%b %Y", "%Y-%m")


def _date(v: Any) -> str:
    s = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", str(v).strip())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(s, fmt).date().isoformat()
        except ValueError:
            continue
    # "March 2,2022", "Wed, March 2, 2022", "2022/03/02", "March 2, 2022 at 10:00 AM": the package's reading
    return _official("date", v)


class _Text(str):
    """Read text; `.unstripped` keeps the quotes and end punctuation, for an expected pattern to match
    ('24"' is 24 inches there, while '"Sprite."' compares as Sprite)."""

    unstripped: str


def _text(v: Any) -> str:
    """Text as a grader reads it: the package's string pipeline (™ dropped, accents and "ß" folded, curly quotes
    straight, hyphens between letters as spaces, case) but signs kept, then quotes and end punctuation around
    it dropped, as the package's last comparison does."""
    s = values.clean(str(v), patterns=False, symbols=False).strip()
    out = _Text(" ".join(s.strip(values.EDGE_PUNCTUATION).split()))
    out.unstripped = s
    return out


def _location(v: Any) -> tuple:
    return ("≈", "location-name", _text(v))


def _url(v: Any) -> str:
    s = str(v).strip()
    lower = s.lower()
    if not is_pattern(s) and (lower.startswith("ssh://") or "@" in s and ":" in s and "://" not in s):
        return _official("url", s)[0]  # "ssh://git@host:2222/a/b.git" is "git@host:a/b.git"
    p = urllib.parse.urlparse(s)
    if p.scheme and p.netloc:
        q = urllib.parse.urlencode(sorted(urllib.parse.parse_qsl(p.query)))
        return f"{p.scheme.lower()}://{p.netloc.lower()}{p.path.rstrip('/')}" + (f"?{q}" if q else "")
    return s.rstrip("/").lower()


def _coords(v: Any) -> tuple:
    try:
        if isinstance(v, dict):
            low = {str(k).lower(): x for k, x in v.items()}
            lat, lon = low.get("latitude", low.get("lat")), low.get("longitude", low.get("lon", low.get("lng")))
        elif isinstance(v, (list, tuple)) and len(v) == 2:
            lat, lon = v
        else:
            lat, lon = str(v).split(",")
        lat, lon = float(lat), float(lon)
    except (ValueError, TypeError):  # "40.44 -79.94", {"la": …, "lo": …}: read as the package reads them
        lat, lon = _official("coordinates", v)
    if not -90 <= lat <= 90:
        raise ValueError(f"latitude out of range: {lat}")
    lon = (lon + 180) % 360 - 180  # 280.06 east is 79.94 west
    return (round(lat, 4), round(lon, 4))  # about 10 m


def _boolean(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "yes", "1"):
        return True
    if s in ("false", "no", "0"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def _month(v: Any) -> int:
    """A month as its number: 1-12 (as a number or digits) or a name or abbreviation ("Sept", "may 2023");
    what this cannot read ("2023-03", "03/2023", "Mär") is read as the package reads it."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if v != int(v) or not 1 <= int(v) <= 12:
            raise ValueError(f"not a month: {v!r}")
        return int(v)
    s = str(v).strip().lower()
    if s.isdigit():
        return _month(int(s))
    for word in re.findall(r"[a-z]+", s):
        for number in range(1, 13):
            if len(word) >= 3 and calendar.month_name[number].lower().startswith(word):
                return number
    return list(calendar.month_name).index(_official("month", v))


def _empty(v: Any) -> None:
    """An empty value: "", "N/A", "none", "null", "nan", {} (the package's words, end punctuation dropped)."""
    return _official("null", v.strip().strip(values.EDGE_PUNCTUATION) if isinstance(v, str) else v)


NORMALIZERS = {"string": _text, "location-name": _location, "month": _month, "integer": _number, "number": _number,
               "currency": _currency, "boolean": _boolean, "duration": _duration, "distance": _distance,
               "date": _date, "url": _url, "coordinates": _coords, "null": _empty}


def _norm(value: Any, schema: dict, expected: bool = False) -> Any:
    kind = schema.get("format") or schema.get("type") or "string"
    if kind == "object":
        if isinstance(value, str):
            value = json.loads(value)
        if not isinstance(value, dict):
            raise ValueError(f"expected an object, got {value!r}")
        return tuple((k, _norm_alts(value.get(k), s, expected))
                     for k, s in sorted((schema.get("properties") or {}).items()))
    if kind == "array":  # a property that is itself a list: the same items in any order
        if isinstance(value, str):
            value = json.loads(value)
        if not isinstance(value, list):
            raise ValueError(f"expected an array, got {value!r}")
        return ("array", tuple(sorted((_norm(v, schema.get("items") or {}, expected) for v in value), key=repr)))
    if value is None:
        return None
    # A format this scorer does not know is compared as text: a valid task file must never make it raise.
    fn = NORMALIZERS.get(kind, _text)
    if expected and fn is _text and is_pattern(value):
        # Only the task's own value is a pattern: an agent answering "^.*$" is text, not a wildcard.
        return ("regex", value.strip())
    try:
        return fn(value)
    except Exception:  # noqa: BLE001 - the package's readers (pint, geopy …) raise their own errors
        return ("raw", _text(value))  # the agent's value, unnormalised: it matches only itself


def _norm_alts(value: Any, schema: dict, expected: bool = True) -> frozenset:
    """A value and its alternatives (an expected list is a set of acceptable values), normalised."""
    items = value if isinstance(value, list) and schema.get("type") != "array" else [value]
    return frozenset(_norm(v, schema, expected) for v in items)


def _same(want: Any, have: Any) -> bool:
    """One expected alternative against one normalised actual value: a pattern must match the whole text
    (case-insensitively, as webarena-verified applies it), a value with a tolerance (_TOLERANCE) must be within
    it, anything else must be equal."""
    if isinstance(want, tuple) and isinstance(have, tuple) and len(want) == len(have) == 3 and want[0] == "≈" \
            and have[0] == "≈" and want[1] == have[1]:
        return _TOLERANCE[want[1]](want[2], have[2])
    if isinstance(want, tuple) and len(want) == 2 and want[0] == "regex":
        text = have[1] if isinstance(have, tuple) and len(have) == 2 and have[0] == "raw" else have
        if not isinstance(text, str):
            return False
        try:
            return any(re.fullmatch(want[1], t, re.IGNORECASE) for t in {text, getattr(text, "unstripped", text)})
        except re.error:  # not a valid pattern after all: compared as text
            return _text(want[1]) == text
    return want == have


def _matches(alternatives: frozenset, have: Any) -> bool:
    return any(_same(want, have) for want in alternatives)


def _is_object(value: Any) -> bool:
    return isinstance(value, tuple) and bool(value) and all(
        isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], frozenset) for p in value)


def _match(expected: frozenset, actual: Any) -> bool:
    if _is_object(actual):
        exp_items = [dict(e) for e in expected if _is_object(e)]
        return any(all(any(_matches(alts, a) for a in dict(actual).get(k, frozenset())) for k, alts in e.items())
                   for e in exp_items)
    return _matches(expected, actual)


def agent_response(cfg: dict, answer: str | None) -> dict:
    """webarena-verified's AgentResponseEvaluator: task type, status, and (for retrieve tasks) the retrieved data."""
    expected = cfg.get("expected") or {}
    got = _parse_response(answer)
    if got is None:
        return _result("AgentResponseEvaluator", 0.0, [{"error": "the answer is not a JSON object"}])
    items, score = [], 1.0
    kind = str(expected.get("task_type", "")).upper()
    got_kind = str(got.get("task_type", got.get("performed_operation", got.get("action", "")))).upper()
    for name, want, have in (("task_type", kind, got_kind),
                             ("status", str(expected.get("status", "")).upper(), str(got.get("status", "")).upper())):
        s = float(want == have)
        items.append({name: want, "got": have, "score": s})
        score *= s
    if kind == "RETRIEVE":
        schema = (cfg.get("results_schema") or {}).get("items") or {}
        want_data = expected.get("retrieved_data")
        have_data = got.get("retrieved_data", got.get("results"))
        if want_data is None:
            s = float(not have_data)
        elif not isinstance(have_data, list):
            s = 0.0
        else:
            try:
                exp = [_norm_alts(v, schema) for v in want_data]
            except (ValueError, TypeError, json.JSONDecodeError) as err:
                # The task's own expected value cannot be read: no answer can be checked against it, so the
                # sample scores 0 and says why instead of stopping the eval.
                items.append({"retrieved_data": want_data, "got": have_data, "score": 0.0,
                              "error": f"expected value unreadable: {err}"})
                return _result("AgentResponseEvaluator", 0.0, items)
            act = []
            for v in have_data:
                try:
                    act.append(_norm(v, schema, expected=False))
                except (ValueError, TypeError, json.JSONDecodeError):
                    act.append(("raw", _text(v)))
            if len(exp) != len(act):
                s = 0.0
            elif cfg.get("ordered"):
                s = float(all(_match(e, a) for e, a in zip(exp, act)))
            else:
                s = float(_assign(exp, act))
        items.append({"retrieved_data": want_data, "got": have_data, "score": s})
        score *= s
    return _result("AgentResponseEvaluator", score, items)


def _assign(exp: list, act: list) -> bool:
    """Whether the actual values can be paired one to one with the expected ones (unordered comparison)."""
    def go(i: int, used: frozenset) -> bool:
        if i == len(act):
            return True
        return any(j not in used and _match(exp[j], act[i]) and go(i + 1, used | {j}) for j in range(len(exp)))
    return go(0, frozenset())


_URL_ONLY = {"url", "query_params", "http_method", "response_status", "headers", "response_cookies"}


def network_event(cfg: dict, final_state: dict | None) -> dict:
    """webarena-verified's NetworkEventEvaluator, for the checks that only need a URL the browser visited.

    The real evaluator reads the whole request log (methods, POST bodies, response codes). Our final state has
    the final URL (and "visited" or "network" URLs when the agent records them): a check asking for a
    navigation (a GET of a URL with given query) is scored against those; anything else is unscorable."""
    expected = {k: v for k, v in (cfg.get("expected") or {}).items() if v is not None}
    method = str(expected.get("http_method") or "GET").upper()
    if cfg.get("should_not_exist") or method != "GET" or expected.get("post_data") or expected.get("response_content") \
            or not set(expected) <= _URL_ONLY:
        return _result("NetworkEventEvaluator", None, [], "needs the browser's request log (method, POST data or "
                       "responses), which the final state does not record")
    if not final_state:
        return _result("NetworkEventEvaluator", None, [], "no final state of the browser")
    seen = [final_state.get("url")] if cfg.get("last_event_only") else \
        [final_state.get("url"), *[e.get("url") if isinstance(e, dict) else e
                                   for e in (final_state.get("visited") or final_state.get("network") or [])]]
    seen = [u for u in seen if u]
    wants = expected.get("url")
    wants = wants if isinstance(wants, list) else [wants]
    ignored = set(cfg.get("ignored_query_params") or [])
    patterns = [re.compile(p) for p in cfg.get("ignored_query_params_patterns") or []]
    want_q = {k: (v if isinstance(v, list) else [v]) for k, v in (expected.get("query_params") or {}).items()}

    def strip(url: str) -> tuple[str, dict]:
        p = urllib.parse.urlparse(str(url))
        q = {k: v for k, v in urllib.parse.parse_qs(p.query).items()
             if k not in ignored and not any(pt.fullmatch(k) for pt in patterns)}
        return f"{p.netloc.lower()}{p.path.rstrip('/')}", q

    def ok(url: str) -> bool:
        base, q = strip(url)
        for w in wants:
            wb, wq = strip(w)
            need = {**wq, **want_q}
            if base == wb and all(sorted(map(str, need[k])) == sorted(q.get(k, [])) for k in need) \
                    and set(q) <= set(need):
                return True
        return False

    s = float(any(ok(u) for u in seen))
    return _result("NetworkEventEvaluator", s, [{"url": expected.get("url"), "seen": seen[:20], "score": s}])

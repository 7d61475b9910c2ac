"""webarena-verified's value types (core/evaluation/data_types; the same in releases 1.0.0 and 1.2.3), for
scoring="official": how each type reads one raw value and when two read values are equal.

    prepare_text(kind, text) -> str      the string pipeline a type applies before reading a string
    read(kind, value) -> normalised      raises on a value the type rejects (the package raises too)
    same(kind, mine, theirs) -> bool     the type's equality over its alternatives (tuples of read values)

Where the package builds on a small, pure-Python library the same library does the reading, so the behaviour is
the package's by construction: pytimeparse2 (durations), pint (distances), geopy (coordinates), price-parser
(currency), word2number (numbers as words), dateutil (months, dates). Two are reproduced here instead:
  - thefuzz's token_sort_ratio (location names): thefuzz needs rapidfuzz, a compiled extension. Reproduced:
    bytes 128-255 dropped, every character but a letter or digit made a space ("_" too, as rapidfuzz's
    compiled default_process does), lower case, tokens sorted, Indel similarity x 100, rounded (half to even).
  - unidecode (ASCII transliteration in the string pipeline): GPL-licensed, so not a dependency. Latin letters
    without an ASCII decomposition, quotes, dashes and the common symbols are transliterated as unidecode does
    and Cyrillic (TRANSLITERATIONS below, checked character by character against unidecode by the case table);
    other letters fall back to their NFKD base; letters of scripts with none (Greek, CJK …) are kept as they are.
The package's derendering of site URLs (http://localhost:7770 -> __SHOPPING__) needs the environment's site map;
without one (the package's default configuration) it does nothing to strings and rejects http(s) values of the
`url` type, which is what is reproduced here.

toolpath mode (webarena_verified.py) reuses these readers where they read a value as a grader would: its own
reader goes first, and a value it cannot read is read here (numbers in words, "36,39 €", "00:07:00", "818 yards",
"Wed, March 2, 2022", ssh git URLs, "N/A" for an empty value). Its text goes through `clean` too, with
`symbols=False`: a sign that unidecode spells in letters ("£" -> "PS", "§" -> "SS") or drops ("★") keeps its
identity there.
"""

from __future__ import annotations

import calendar
import re
import unicodedata
import warnings
from datetime import timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any


def is_pattern(value: Any) -> bool:
    """webarena-verified's test for an expected value that is a regular expression: a string that starts with
    "^" and ends with "$" (e.g. "^#?\\s*0*170$" for order #170). Such a value is matched, not compared."""
    return isinstance(value, str) and len(value) >= 2 and value.startswith("^") and value.endswith("$")


# The characters the package strips from both ends of two strings before its last string comparison.
EDGE_PUNCTUATION = "'\"`.,;:!?"

_HYPHEN = re.compile(r"(?<=[a-zA-Z])[\u002D\u2010-\u2015\u2212\u00AD]|[\u002D\u2010-\u2015\u2212\u00AD](?=[a-zA-Z])")

# Transliterations of characters NFKC leaves non-ASCII and NFKD cannot reduce to an ASCII base.
_ASCII = {
    "ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe", "Œ": "OE", "đ": "d", "Đ": "D", "ł": "l",
    "Ł": "L", "þ": "th", "Þ": "Th", "ð": "d", "Ð": "D", "ı": "i", "ŋ": "ng", "Ŋ": "NG", "ħ": "h", "Ħ": "H",
    "ĸ": "k", "ŧ": "t", "Ŧ": "T", "ƒ": "f",
    "‘": "'", "’": "'", "‚": ",", "‛": "'", "“": '"', "”": '"', "„": ",,", "‟": '"', "′": "'", "″": "''",
    "‹": "<", "›": ">", "«": "<<", "»": ">>", "–": "-", "—": "--", "‒": "-", "―": "--", "−": "-", "‐": "-",
    "‑": "-", "•": "*", "·": "*", "⁄": "/", "¿": "?", "¡": "!", "§": "SS", "¶": "P", "±": "+-", "×": "x",
    "÷": "/", "°": "deg", "¬": "!", "¦": "|", "€": "EUR", "£": "PS", "¥": "Y=", "¢": "C/", "¤": "$?", "₹": "Rs",
    "₽": "R", "₩": "W", "₪": "NS", "₫": "D", "₱": "P", "₿": "BTC", "†": "+", "‡": "++", "‰": "%0", "→": "-",
    "←": "-", "✓": "", "★": "", "☆": "",
}
_CYRILLIC = ("A B V G D E Zh Z I I K L M N O P R S T U F Kh Ts Ch Sh Shch ' Y ' E Iu Ia").split()
_ASCII.update({chr(0x410 + i): t for i, t in enumerate(_CYRILLIC)})
_ASCII.update({chr(0x430 + i): t.lower() for i, t in enumerate(_CYRILLIC)})
_ASCII.update({"Ё": "Io", "ё": "io"})
TRANSLITERATIONS = dict(_ASCII)
# Signs the way people type them in ASCII ("5 EUR", "16 x 24", "a - b"): folded in toolpath mode too.
_TYPED_SIGNS = frozenset("€×−÷±⁄")
_SPELLED_PUNCTUATION = frozenset("§¶†‡‰")


def _kept_sign(ch: str) -> bool:
    """A sign toolpath mode keeps as it is: a symbol (currency, maths, marks, stars) or a mark unidecode spells
    in letters; "a £ b" is not "a PS b" to a reader."""
    return ch not in _TYPED_SIGNS and (unicodedata.category(ch).startswith("S") or ch in _SPELLED_PUNCTUATION)


def ascii_fold(s: str, symbols: bool = True) -> str:
    """unidecode's transliteration for Latin and Cyrillic text. A letter of another script (Greek, CJK …) is
    kept as it is where unidecode would spell it in ASCII: equal names stay equal, different ones different,
    but a name in that script never equals its romanisation, as it can in the package. symbols=False keeps
    the signs of _kept_sign as they are (toolpath mode)."""
    out = []
    for ch in s:
        if ch < "\x80":
            out.append(ch)
        elif not symbols and _kept_sign(ch):
            out.append(ch)
        elif ch in _ASCII:
            out.append(_ASCII[ch])
        else:
            base = unicodedata.normalize("NFKD", ch)
            ascii_base = base.encode("ascii", "ignore").decode("ascii")
            out.append(ascii_base if ascii_base or not ch.isalnum() else ch)
    return "".join(out)


def clean(s: str, patterns: bool = True, symbols: bool = True) -> str:
    """The base string pipeline: marks dropped, NFKC, hyphens beside letters to spaces, controls dropped,
    ASCII, whitespace collapsed, casefold. A pattern (^…$) is left alone (unless patterns=False: toolpath
    mode reads an answer's "^…$" as text); symbols=False: see ascii_fold."""
    if not s or patterns and is_pattern(s):
        return s
    s = s.translate({0x2122: None, 0x00AE: None, 0x2120: None, 0x00A9: None})
    s = _HYPHEN.sub(" ", unicodedata.normalize("NFKC", s))
    s = "".join(" " if c in "\t\n\r" else c for c in s if not unicodedata.category(c).startswith("C") or c in "\t\n\r")
    s = ascii_fold(s, symbols)
    return re.sub(r"\s+", " ", s.strip()).casefold()


def prepare_text(kind: str, s: str) -> str:
    if kind == "url":  # URLs keep their case and punctuation
        return s.strip()
    if kind == "null":  # "N / A" -> "n/a", nothing else
        return re.sub(r"\s*/\s*", "/", re.sub(r"\s+", " ", s.strip().lower())) if s else s
    s = clean(s)
    return re.sub(r"(\d+):(\d+)\s*hours?", r"\1h\2m", s) if kind == "duration" else s


def _plain_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _duration(v: Any) -> float:
    from pytimeparse2 import parse

    if not v:
        raise ValueError("empty duration")
    text = str(v)
    if _plain_number(text):
        raise ValueError("a duration needs a unit")
    seconds = parse(text)
    if seconds is None:
        raise ValueError(f"unreadable duration {text!r}")
    return timedelta(seconds=float(seconds)).total_seconds()


@lru_cache(maxsize=1)
def _units():
    import pint

    return pint.UnitRegistry()


# pint evaluates powers: "2**9**9 km" would run for ever. The package would hang on it; here it is unreadable.
_BIG_POWER = re.compile(r"(\*\*|\^)\s*[-+(\s]*\d{3,}|(\*\*|\^).*(\*\*|\^)")


def _distance(v: Any) -> Decimal:
    if not v and not isinstance(v, (int, float, Decimal)):
        raise ValueError("empty distance")
    text = re.sub(r"(\d+(?:\.\d+)?)\s*k(?=\s|$)", r"\1 km", str(v), flags=re.IGNORECASE)  # "110k" -> "110 km"
    if _plain_number(text):
        raise ValueError("a distance needs a unit")
    if _BIG_POWER.search(text):
        raise ValueError("a power too large to evaluate")
    units = _units()
    return Decimal(str(units.parse_expression(text).to(units.meter).magnitude))


def _coordinates(v: Any) -> tuple[float, float]:
    from geopy import Point

    if not v:
        raise ValueError("empty coordinates")
    if isinstance(v, dict):  # keys that start "latitude" / "longitude" (2+ letters) or "lng", first of each
        keys = [k for k in v if isinstance(k, str)]
        lat = next((k for k in keys if len(k) >= 2 and "latitude".startswith(k.lower())), None)
        lon = next((k for k in keys if len(k) >= 2 and "longitude".startswith(k.lower()) or k.lower() == "lng"), None)
        if not (lat and lon):
            raise ValueError("no latitude / longitude keys")
        with warnings.catch_warnings():  # geopy warns about a latitude beyond a pole before refusing it
            warnings.simplefilter("ignore")
            point = Point(latitude=v[lat], longitude=v[lon])
    elif isinstance(v, (list, tuple)) and len(v) == 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            point = Point(latitude=v[0], longitude=v[1])
    elif isinstance(v, str):
        point = Point(v)
    else:
        raise ValueError(f"not coordinates: {type(v).__name__}")
    if not -90.0 <= point.latitude <= 90.0:
        raise ValueError("latitude out of range")
    return point.latitude, point.longitude


def _location_name(v: Any) -> str:
    if v is None:
        raise ValueError("None")
    return str(v).lower().strip() if v else ""


def _empty(v: Any) -> None:
    if not v:
        if isinstance(v, (int, float, Decimal)):  # 0 and false are values, not "empty"
            raise ValueError("zero is not empty")
        return None
    if isinstance(v, str) and v in ("n/a", "na", "nan", "null", "none"):
        return None
    raise ValueError(f"not empty: {v!r}")


def _ssh(value: str) -> tuple:
    from urllib.parse import urlparse

    if value.lower().startswith("ssh://"):
        netloc = urlparse(value).netloc
        user = netloc.split("@")[0].lower() if "@" in netloc else "git"
        path = urlparse(value).path
    else:
        user, host_path = value.split("@", 1)
        if ":" not in host_path:
            raise ValueError("no ':' after the host")
        user, path = user.lower(), "/" + host_path.split(":", 1)[1].lstrip("/")
    return (f"{user}@__SSH_HOST__:{path.lstrip('/').lower()}", None, False)


def _url(v: Any) -> tuple:
    """(base URL, query, is pattern). Git SSH URLs are read; an http(s) URL needs the environment's site map
    to be derendered, which the package's default configuration lacks, so it is refused as the package does."""
    if not v:
        raise ValueError("empty URL")
    if is_pattern(v):
        return (v.rstrip("/"), None, True)
    value = v.rstrip("/")
    lower = value.lower()
    if lower.startswith("ssh://") or lower.startswith("git@") and ":" in value and "://" not in value:
        return _ssh(value)
    raise ValueError("an http(s) URL needs the site map to be derendered")


def _currency(v: Any) -> Decimal:
    from price_parser import Price

    if not v and not isinstance(v, (int, float, Decimal)):
        raise ValueError("empty amount")
    text = str(v)
    negative = text.startswith("-")
    text = text.replace("-", "") if negative else text
    price = Price.fromstring(text, decimal_separator="." if text.rfind(".") > text.rfind(",") else ",")
    if price.amount_float is None:
        raise ValueError(f"no amount in {text!r}")
    amount = Decimal(str(price.amount_float))
    return -amount if negative else amount


def _number(v: Any) -> float:
    from word2number import w2n

    if not v and not isinstance(v, (int, float, Decimal)):
        raise ValueError("empty number")
    if isinstance(v, (int, float)):  # a JSON true is 1.0 here, as in the package
        return float(v)
    try:
        return float(str(v).replace(",", "").replace(" ", ""))
    except ValueError:
        return float(w2n.word_to_num(str(v)))


def _boolean(v: Any) -> bool:
    if isinstance(v, (bool, int, float)):
        return bool(v)
    s = str(v).strip().lower() if v else ""
    if s in ("true", "yes", "y", "1", "t", "on"):
        return True
    if s in ("false", "no", "n", "0", "f", "off"):
        return False
    raise ValueError(s)


def _month(v: Any) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, bool):
        if v != int(v) or not 1 <= int(v) <= 12:
            raise ValueError(v)
        return calendar.month_name[int(v)]
    s = str(v or "").strip()
    if not s:
        raise ValueError("empty")
    if re.fullmatch(r"[+-]?\d+", s):
        if not 1 <= int(s) <= 12:
            raise ValueError(s)
        return calendar.month_name[int(s)]
    from dateutil import parser

    try:
        return calendar.month_name[parser.parse(s, default=parser.parse("2000-01-01")).month]
    except (ValueError, OverflowError) as err:
        raise ValueError(s) from err


def _date(v: Any) -> str:
    if not v:
        raise ValueError("empty")
    if not isinstance(v, str):  # the package's re.sub raises on a number: 20240115 is not a date there
        raise ValueError("not a string")
    from dateutil import parser

    try:
        return parser.parse(re.sub(r",(?! )", ", ", v), dayfirst=False).date().isoformat()
    except (ValueError, OverflowError, TypeError) as err:
        raise ValueError(str(v)) from err


READERS = {"boolean": _boolean, "month": _month, "date": _date, "duration": _duration, "distance": _distance,
           "coordinates": _coordinates, "location-name": _location_name, "null": _empty, "url": _url,
           "currency": _currency, "number": _number, "integer": _number}


def read(kind: str, value: Any) -> Any:
    return READERS[kind](value)


def _processed(s: str) -> str:
    s = "".join(c for c in s if not "\x80" <= c <= "\xff")
    return "".join(c if c.isalnum() else " " for c in s).strip().lower()


def _lcs(a: str, b: str) -> int:
    """Length of the longest common subsequence, bit-parallel (Hyyrö), so a long reply stays quick."""
    if not a or not b:
        return 0
    full = (1 << len(a)) - 1
    where: dict[str, int] = {}
    for i, c in enumerate(a):
        where[c] = where.get(c, 0) | 1 << i
    v = full
    for c in b:
        u = v & where.get(c, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def token_sort_ratio(a: str, b: str) -> int:
    a, b = (" ".join(sorted(_processed(s).split())) for s in (a, b))
    total = len(a) + len(b)
    if not total:
        return 100
    return int(round((1 - (total - 2 * _lcs(a, b)) / total) * 100))


def same(kind: str, mine: tuple, theirs: tuple) -> bool:
    """Equality of two read values (their alternatives), with each type's tolerance."""
    if kind == "duration":  # any pair within max(3 minutes, 10 %)
        return any(abs(a - b) <= max(180.0, max(a, b) * 0.10) for a in mine for b in theirs)
    if kind == "distance":  # any pair within max(10 m, 2 %)
        return any(abs(a - b) <= max(Decimal("10"), max(a, b) * Decimal("0.02")) for a in mine for b in theirs)
    if kind == "coordinates":  # first alternatives only, 1e-5 degrees on each axis
        return abs(mine[0][0] - theirs[0][0]) <= 1e-5 and abs(mine[0][1] - theirs[0][1]) <= 1e-5
    if kind == "currency":  # first alternatives only, within 0.1
        return abs(mine[0] - theirs[0]) <= Decimal("0.1")
    if kind == "location-name":  # token-sorted similarity of 80 or more; an empty name equals only an empty one
        return any(a == b if not a or not b else token_sort_ratio(a, b) >= 80 for a in mine for b in theirs)
    if kind == "url":
        return any(_url_same(a, b) for a in mine for b in theirs)
    return bool(set(mine) & set(theirs))


def _url_same(a: tuple, b: tuple) -> bool:
    for pattern, text in ((a, b), (b, a)):
        try:
            if pattern[2] and re.match(pattern[0], text[0]):
                return True
        except re.error:  # the package raises on a broken pattern: the task fails
            return False
    return not a[2] and not b[2] and a[0].lower().rstrip("/") == b[0].lower().rstrip("/")

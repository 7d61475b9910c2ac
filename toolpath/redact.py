"""Secrets never leave the process: every text that is printed, stored or served passes through `redact`.

Three kinds are removed: the values of known secrets (the API key a policy was given, and every environment
variable whose name says it holds one: *_KEY, *_TOKEN, *_SECRET, *PASSWORD*), credentials written into a URL
(`http://user:KEY@host`), and Authorization headers or bearer tokens quoted back by a server. A known value is
also found in the forms it takes when quoted back: JSON-escaped, percent-encoded, and (for a URL's user and
password) inside the Basic authorization an HTTP client makes of them. A value shorter than 8 characters is
not treated as a secret: it would redact ordinary words. Nothing here imports the rest of toolpath, so every
layer can use it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

MARK = "[redacted]"
_MIN_LEN = 8
_SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$|PASSWORD", re.I)
# scheme://user:password@host or scheme://token@host: everything between '//' and the last '@' of the authority
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<cred>[^/\s@'\"<>]+)@")
# Authorization: Bearer …, "authorization": "Basic …", x-api-key: …, api_key=…, and a bare "Bearer TOKEN"
_HEADERS = re.compile(
    r"(?P<key>\b(?:proxy-)?authorization\b|\bx-api-key\b|\bapi[_-]?key\b)(?P<sep>['\"]?\s*[:=]\s*['\"]?)"
    r"(?P<value>(?:(?:bearer|basic|token)\s+)?[^\s'\",;}&]+)", re.I)
_BEARER = re.compile(r"\b(?P<kind>bearer|basic)\s+(?P<value>[A-Za-z0-9._~+/=\-]{8,})", re.I)

_registered: set[str] = set()
_lock = threading.Lock()
_cache: tuple[frozenset[str], re.Pattern | None] = (frozenset(), None)


def register_secret(value: str | None) -> None:
    """Treat `value` as a secret from now on in this process (a key read from a file, a spec's env variable)."""
    if isinstance(value, str) and len(value.strip()) >= _MIN_LEN:
        with _lock:
            _registered.add(value.strip())


def strip_url_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without the `user:password@` it may carry, and that pair (percent-decoded), or None when it has
    none. The pair is registered as secrets first, with the Basic authorization value made of it."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:  # not a URL we can take apart: leave it to redact()'s pattern
        return url, None
    if user is None and password is None:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    pair = (unquote(user or ""), unquote(password or ""))
    for value in (userinfo, *pair, base64.b64encode(f"{pair[0]}:{pair[1]}".encode()).decode()):
        register_secret(value)
    return urlunsplit(parts._replace(netloc=hostport)), pair


def secret_env_names(environ: dict[str, str] | None = None) -> list[str]:
    """Names of environment variables that hold secrets by their name."""
    env = os.environ if environ is None else environ
    return [k for k in env if _SECRET_NAME.search(k)]


def known_secrets() -> frozenset[str]:
    values = {os.environ[k].strip() for k in secret_env_names()}
    with _lock:
        values |= _registered
    return frozenset(v for v in values if len(v) >= _MIN_LEN)


def quoted_forms(secret: str) -> set[str]:
    """The secret as written and as a server or a log may quote it back: JSON-escaped, percent-encoded."""
    return {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], quote(secret, safe="")}


def _secrets_pattern() -> re.Pattern | None:
    global _cache
    secrets = known_secrets()
    if secrets != _cache[0]:
        forms = set().union(*(quoted_forms(s) for s in secrets)) if secrets else set()
        # Longest first, so a secret that contains another is removed whole.
        alternatives = "|".join(re.escape(s) for s in sorted(forms, key=len, reverse=True))
        _cache = (secrets, re.compile(alternatives) if alternatives else None)
    return _cache[1]


def redactor() -> Callable[[str], str]:
    """`redact` bound to the secrets known now: for many texts at once, reading the environment once."""
    pattern = _secrets_pattern()
    return lambda text: _redact_with(pattern, text)


def _redact_with(pattern: re.Pattern | None, text: str) -> str:
    if not isinstance(text, str) or len(text) < _MIN_LEN:  # too short to hold a secret (a dict key, a word)
        return text
    if pattern is not None:
        text = pattern.sub(MARK, text)
    # Each pattern below matches only where its literal words are: look for them first. A substring test is
    # some hundred times faster than the patterns, which try every word start of a long text (a model's reply,
    # a page) and would cost milliseconds per stored step.
    low = text.lower()
    if "://" in text and "@" in text:
        text = _URL_CREDENTIALS.sub(lambda m: m["scheme"] + (MARK + "@" if m["cred"] != MARK else m["cred"] + "@"),
                                    text)
    if "authorization" in low or ("api" in low and "key" in low):
        text = _HEADERS.sub(lambda m: m["key"] + m["sep"] + MARK, text)
    if "bearer" in low or "basic" in low:
        text = _BEARER.sub(lambda m: m["kind"] + " " + MARK, text)
    return text


def redact(text: str) -> str:
    """`text` with every known secret value, URL credential and authorization header value replaced by MARK."""
    return _redact_with(_secrets_pattern(), text)


def redact_data(value: Any, redact_text: Callable[[str], str] | None = None) -> Any:
    """`redact` applied to every string inside nested dicts, lists and tuples (keys included)."""
    redact_text = redact_text or redactor()
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact_data(k, redact_text): redact_data(v, redact_text) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(v, redact_text) for v in value)
    return value

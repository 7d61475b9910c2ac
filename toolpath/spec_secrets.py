"""Secrets and a task spec: secrets written into one are found before it is accepted, because a spec is stored
with its run and shown by the viewer; and the keys a spec may have sent for it (`model.api_key_env`) are those
the user allowed, each to the server it was given for. Floor 0: imports only redact and spec_reading.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .spec_reading import shown_path

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")


def _secret_found(path: tuple, what: str) -> tuple[str, str]:
    """The problem for a secret at `path`. The message starts with redact's mark, the value it stands for, so
    that printing it through redact() (which hides whatever follows "api_key: ") changes nothing."""
    from .redact import MARK

    if path[:1] == ("model",):
        instead = "name that variable in model.api_key_env (default OPENAI_API_KEY)"
    else:
        instead = "let what needs it read it from there"
    return (shown_path(path), f"{MARK} — {what}; a spec is stored with its run and shown by the viewer: keep the "
                               f"secret in an environment variable and {instead}")


def _says_secret(key: Any) -> bool:
    """Does a field's name say it holds a secret (api_key, apiKey, access-token, password, client_secret …)?"""
    from .redact import secret_env_names

    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|-", "_", str(key))  # apiKey, access-token → api_Key, access_token
    return bool(secret_env_names({name: ""}))


def url_holds_secret(text: str) -> bool:
    """A URL with credentials (scheme://user:KEY@host) or a secret-named query parameter (?api_key=…)."""
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", text):
        return False
    parts = urlsplit(text)
    return "@" in parts.netloc or any(_says_secret(k) for k, _ in parse_qsl(parts.query))


def _text_holds_secret(text: str, secrets: frozenset[str], prose: bool) -> bool:
    """A known secret's value anywhere; in configuration (not prose, where "bearer bonds" is just words) also
    URL credentials and whatever else redact() would hide (an Authorization header, `api_key=…`)."""
    from .redact import redact

    return any(s in text for s in secrets) or (not prose and (url_holds_secret(text) or redact(text) != text))


def _key_env_name_problem(value: Any) -> str | None:
    """What is wrong with an `api_key_env` value: not a variable's name (perhaps the key itself: never shown), or
    a variable the user did not allow."""
    if not isinstance(value, str):
        return None  # the field's type is the model's to check
    if not _ENV_NAME.match(value):
        return "expected the name of an environment variable (capital letters, digits and _, e.g. OPENAI_API_KEY), " \
               "not the key itself"
    return key_env_problem(value)


def secret_problems(data: dict) -> list[tuple[str, str]]:
    """Secrets written into a spec, which would be stored in runs.spec and served by the viewer: a field whose
    name says it is a key, token, password or secret with a literal value; a URL with credentials in it; text
    that redact() would hide (an Authorization header, a known secret's value); an api_key_env (the spec's
    model's or a graph node's) that is not the name of a variable the user allowed. Expected answers
    (evaluator.expected) are data, not configuration: not checked."""
    from .redact import known_secrets

    problems = []
    secrets = known_secrets()
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:  # shape_problems has bounded the data: no cycles, at most MAX_SPEC_VALUES values
        path, value = stack.pop()
        if path[:2] == ("evaluator", "expected"):
            continue
        if path[-1:] == ("api_key_env",):  # the spec's model or a graph node's own: a name the user allowed
            problem = _key_env_name_problem(value)
            if problem is not None:
                problems.append((shown_path(path), problem))
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                if _says_secret(key) and not isinstance(item, (bool, dict, list)) and item not in (None, ""):
                    problems.append(_secret_found((*path, key), "a secret written into the spec"))
                else:
                    stack.append(((*path, key), item))
        elif isinstance(value, (list, tuple)):
            stack.extend(((*path, i), item) for i, item in enumerate(value))
        elif isinstance(value, str) and _text_holds_secret(value, secrets, prose=path == ("instruction",)):
            problems.append(_secret_found(path, "credentials, a key or a token written into the spec"))
    return problems


# ---- which environment variables a spec may name as its key, and where each key may go ---------------------
# A spec may come from anyone, and `model.api_key_env` reads the named variable and sends its value as a Bearer
# token to the spec's `base_url`. So the names are the user's to allow (this variable, or `--api-key-env` on the
# command line, which adds to it), never the spec's; and a key goes only to the server it was given for.

KEYS_VARIABLE = "TOOLPATH_API_KEYS"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_SERVER = "https://api.openai.com/v1"
_GRANT = re.compile(r"^(?P<name>[A-Za-z0-9_*?]{1,128})(?:=(?P<url>https?://\S+))?$")


def default_server() -> str:
    """The server a key without a URL of its own is for: OPENAI_BASE_URL, else OpenAI's API."""
    import os

    return os.environ.get("OPENAI_BASE_URL", "").strip() or DEFAULT_SERVER


def parse_key_grants(text: str) -> list[tuple[str, str | None]]:
    """`NAME[=URL]` entries of TOOLPATH_API_KEYS or --api-key-env (commas or spaces between them) -> (name or
    pattern such as `*_API_KEY`, the URL its key is for or None for default_server()). Raises ValueError naming
    the entry that is neither."""
    grants = []
    for entry in text.replace(",", " ").split():
        m = _GRANT.match(entry)
        if m is None:
            raise ValueError(f"{entry!r}: expected NAME or NAME=URL (a variable's name, or a pattern such as "
                             "*_API_KEY, optionally with the http(s) URL of the one server its key is for)")
        grants.append((m["name"], m["url"]))
    return grants


def key_grants() -> list[tuple[str, str | None]]:
    """What the user allows: OPENAI_API_KEY for default_server(), and TOOLPATH_API_KEYS's entries. An entry this
    cannot read allows nothing (the command line checks what it adds; see allow_key_env)."""
    import os

    grants: list[tuple[str, str | None]] = [(DEFAULT_KEY_ENV, None)]
    for entry in os.environ.get(KEYS_VARIABLE, "").replace(",", " ").split():
        try:
            grants += parse_key_grants(entry)
        except ValueError:
            continue
    return grants


def allow_key_env(text: str) -> None:
    """Allow the `NAME[=URL]` entries of `text` for this process and the workers it starts (a command-line
    flag's value); ValueError names a bad entry."""
    import os

    parse_key_grants(text)
    os.environ[KEYS_VARIABLE] = " ".join(filter(None, [os.environ.get(KEYS_VARIABLE, "").strip(), text]))


def key_servers(name: str) -> list[str]:
    """The servers the user gave `name`'s key for (default_server() for an entry without a URL)."""
    from fnmatch import fnmatchcase

    return [url or default_server() for pattern, url in key_grants() if fnmatchcase(name, pattern)]


def key_env_problem(name: str) -> str | None:
    """Why a spec may not name the variable `name` as its key, or None when the user allowed it."""
    if key_servers(name):
        return None
    return (f"{name} is not a variable the user allowed as a model key; a spec may only name OPENAI_API_KEY or "
            f"what the user allows: {KEYS_VARIABLE}={name} (or {name}=URL, the one server its key is for) in the "
            f"environment, or --api-key-env {name} on the command line")


def _server(url: str) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path) of an http(s) URL, credentials left out; None when it is not one."""
    try:
        parts = urlsplit(url.strip())
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        return None
    if scheme not in ("http", "https") or not host:
        return None
    return scheme, host, port, parts.path.rstrip("/")


def key_goes_to(name: str, url: str) -> bool:
    """May `name`'s key be sent to `url`? Only to a server the user gave it for: same scheme, host and port, and a
    path at or under the one given (a key for https://api.openai.com/v1 is not sent to http://evil.example/v1)."""
    want = _server(url)
    for allowed in map(_server, key_servers(name)):
        if want and allowed and want[:3] == allowed[:3] and (want[3] + "/").startswith(allowed[3] + "/"):
            return True
    return False

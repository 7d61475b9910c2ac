"""Secrets written into a task spec: found before the spec is accepted, because a spec is stored with its run
and shown by the viewer. Floor 0: imports only redact and spec_reading.
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


def _url_holds_secret(text: str) -> bool:
    """A URL with credentials (scheme://user:KEY@host) or a secret-named query parameter (?api_key=…)."""
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", text):
        return False
    parts = urlsplit(text)
    return "@" in parts.netloc or any(_says_secret(k) for k, _ in parse_qsl(parts.query))


def _text_holds_secret(text: str, secrets: frozenset[str], prose: bool) -> bool:
    """A known secret's value anywhere; in configuration (not prose, where "bearer bonds" is just words) also
    URL credentials and whatever else redact() would hide (an Authorization header, `api_key=…`)."""
    from .redact import redact

    return any(s in text for s in secrets) or (not prose and (_url_holds_secret(text) or redact(text) != text))


def secret_problems(data: dict) -> list[tuple[str, str]]:
    """Secrets written into a spec, which would be stored in runs.spec and served by the viewer: a field whose
    name says it is a key, token, password or secret with a literal value; a URL with credentials in it; text
    that redact() would hide (an Authorization header, a known secret's value); an api_key_env that is not
    the name of a variable. Expected answers (evaluator.expected) are data, not configuration: not checked."""
    from .redact import known_secrets

    problems = []
    model = data.get("model")
    env_name = model.get("api_key_env") if isinstance(model, dict) else None
    if isinstance(env_name, str) and not _ENV_NAME.match(env_name):
        problems.append(("model.api_key_env", "expected the name of an environment variable (capital letters, digits "
                                              "and _, e.g. OPENAI_API_KEY), not the key itself"))
    secrets = known_secrets()
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:  # shape_problems has bounded the data: no cycles, at most MAX_SPEC_VALUES values
        path, value = stack.pop()
        if path[:2] == ("evaluator", "expected") or path == ("model", "api_key_env"):
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

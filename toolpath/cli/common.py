"""What every command shares: exit codes, the bad-input error, printing untrusted text safely, the run store.

Text a model made or the store holds is untrusted: every line printed goes through `printable`, which hides
secrets and shows terminal control sequences as escapes instead of sending them to the terminal.
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """Raised by a command for input the user must fix; printed without a traceback, exit 2."""


# C0 controls but tab and newline (ESC starts terminal escapes; CR and BS overwrite what was printed), DEL,
# C1 controls (a terminal may read 0x9b as ESC [), and the bidirectional overrides and isolates that make
# text display in an order other than the one it has.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(ch: str) -> str:
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def printable(text: Any) -> str:
    """`text` safe to print on a terminal: known secrets redacted (toolpath.redact), control characters and
    bidi overrides shown as visible escapes (ESC as \\x1b). Newlines and tabs are kept."""
    from ..redact import redact

    return _UNPRINTABLE.sub(lambda m: _escape(m.group()), redact(str(text)))


def echo(text: Any = "", file=None, end: str = "\n", flush: bool = False) -> None:
    print(printable(text), file=file or sys.stdout, end=end, flush=flush)


def echo_json(data: Any, ensure_ascii: bool = True, indent: int | None = None) -> None:
    """One JSON document on stdout, secrets redacted; without ensure_ascii, the characters `printable` escapes
    are written as JSON escapes (\\u009b), which a JSON reader turns back into the same text."""
    from ..redact import redact_data

    text = json.dumps(redact_data(data), ensure_ascii=ensure_ascii, indent=indent, default=str)
    print(_UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def error(msg: str) -> None:
    echo(f"toolpath: {msg}", file=sys.stderr)


def store_from_args(args, readonly: bool = False):
    """The run store; reading commands open it read-only, so they work on a home they cannot write."""
    from ..runs import open_store

    return open_store(args.home, readonly=readonly)


def fmt_tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def one_line(text: str, n: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def when(ts: float) -> str:
    """A stored timestamp as local date and time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def parse_pairs(items: list[str] | None, flag: str) -> dict:
    """`KEY=VALUE` command-line pairs: a JSON value where it parses (numbers, true, lists), text otherwise."""
    import json

    out: dict = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"{flag} {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def decoding_option(text: str) -> dict:
    """`--decoding KIND` as model.options.decoding: {"kind": KIND} (the method's defaults), or the mapping a JSON
    object spells out. What the kind and its options may be is checked where the spec loads, not here."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            raise BadInput(f"--decoding {text!r}: not valid JSON: {err.msg} at column {err.colno}") from None
        if not isinstance(value.get("kind"), str) or not value["kind"].strip():
            raise BadInput(f"--decoding {text!r}: the mapping needs a \"kind\" (e.g. vcd or shield)")
        return value
    if not text or not re.fullmatch(r"[A-Za-z0-9_.-]+", text):
        raise BadInput(f"--decoding {text!r}: expected a decoding kind such as vcd or shield, or a JSON mapping")
    return {"kind": text}


def model_overrides(args) -> dict:
    """model.options from --kv-cache, --weights, --decoding and --engine, only those given (run, eval and serve
    take the same flags). Values are in the spec's own form (kv_cache as KIND[:N] text, decoding as a mapping):
    the spec checks them where it loads, so a bad value is one spec error naming the field."""
    options: dict = {}
    if getattr(args, "kv_cache", None):
        options["kv_cache"] = args.kv_cache
    if getattr(args, "weights", None) is not None:
        options["weights"] = args.weights
    if getattr(args, "decoding", None):
        options["decoding"] = decoding_option(args.decoding)
    if getattr(args, "engine", None):
        options["engine"] = args.engine
    return options


# ---- what the user lets a spec reach: folders of files, environment variables as model keys ---------------
ALLOW_PATH_HELP = ("a folder whose files the spec may name besides its own folder (inputs, a start page on disk; "
                   "repeatable); a spec's files are otherwise taken relative to its folder and must be under it")
API_KEY_ENV_HELP = ("let the spec's model.api_key_env name this variable (repeatable): NAME, sent to OPENAI_BASE_URL "
                    "(else OpenAI's API), or NAME=URL, sent only to that server; a pattern such as '*_API_KEY' "
                    "allows every name it matches (also $TOOLPATH_API_KEYS, the same entries)")
BASE_URL_HELP = ("override the spec's model.base_url; the spec's key (model.api_key_env) may then be sent there, "
                 "since you named the server")


def add_reach_arguments(parser, paths: bool = True, base_url: bool = True) -> None:
    """The flags by which the user, never the spec, lets a spec read files outside its folder and keys from the
    environment: --allow-path, --api-key-env, --base-url."""
    if paths:
        parser.add_argument("--allow-path", action="append", metavar="DIR", help=ALLOW_PATH_HELP)
    parser.add_argument("--api-key-env", action="append", metavar="NAME[=URL]", help=API_KEY_ENV_HELP)
    if base_url:
        parser.add_argument("--base-url", metavar="URL", help=BASE_URL_HELP)


def allowed_folders(args) -> list:
    """--allow-path's folders, each checked to be one."""
    from pathlib import Path

    folders = []
    for item in getattr(args, "allow_path", None) or []:
        folder = Path(item).expanduser()
        if not folder.is_dir():
            raise BadInput(f"--allow-path {item!r}: no such folder")
        folders.append(folder.resolve())
    return folders


def allow_keys(args) -> None:
    """--api-key-env's entries, allowed for this process and the workers it starts."""
    from ..spec_secrets import allow_key_env

    for item in getattr(args, "api_key_env", None) or []:
        try:
            allow_key_env(item)
        except ValueError as err:
            raise BadInput(f"--api-key-env {err}") from None


def bind_base_url(args, data: dict) -> None:
    """--base-url: the spec's model.base_url in `data` replaced, and its key allowed to go there (the user named
    the server). A URL with credentials is refused: the spec, URL included, is stored with the run."""
    from ..spec_secrets import DEFAULT_KEY_ENV, allow_key_env, url_holds_secret

    url = getattr(args, "base_url", None)
    if url is None:
        return
    url = url.strip()
    if not re.match(r"^https?://[^/\s]+", url):
        raise BadInput(f"--base-url {url!r}: expected an http(s):// URL")
    if url_holds_secret(url):
        raise BadInput("--base-url: the URL holds credentials, and the spec (URL included) is stored with the run; "
                       "put them in OPENAI_BASE_URL or a key variable instead")
    model = data.setdefault("model", {})
    model["base_url"] = url
    for name in dict.fromkeys([model.get("api_key_env") or DEFAULT_KEY_ENV, DEFAULT_KEY_ENV]):  # and its fallback
        allow_key_env(f"{name}={url}")

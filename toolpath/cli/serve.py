"""`toolpath serve MODEL`: the model behind an OpenAI-compatible API (toolpath/serve), until Ctrl-C."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

from .common import EXIT_FAILED, EXIT_OK, BadInput, echo, error, model_overrides


def _model_spec(args):
    """The ModelSpec the options describe, checked the way a run spec's `model` is."""
    from pydantic import ValidationError

    from ..spec import ModelSpec

    name = args.model
    kind, sep, value = name.partition(":")
    if kind in ("hf", "scripted") and value and Path(value).expanduser().exists():
        name = f"{kind}:{Path(value).expanduser().resolve()}"  # the server's working directory may change
    fields = {"name": name, "options": model_overrides(args)}
    if args.max_tokens is not None:
        fields["max_new_tokens"] = args.max_tokens
    try:
        from ..policies.settings import settled_model

        return settled_model(ModelSpec(**fields))  # its kind options too, before the model loads
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'model'}: {e['msg'].removeprefix('Value error, ')}"
                             for e in err.errors())
        raise BadInput(f"toolpath serve {args.model}: {problems}") from None
    except ValueError as err:  # a kind's option: "model.options.kv_cache.bits: ..."
        raise BadInput(f"toolpath serve {args.model}: {err}") from None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _allowed_hosts(names: list[str]) -> tuple[str, ...]:
    """--allowed-host names, each a bare host name or address as a Host header carries it (no port, no path)."""
    from ..viewer.server import HOST_HEADER

    for name in names:
        m = HOST_HEADER.fullmatch(name.strip())
        if m is None or m["port"] is not None:
            raise BadInput(f"--allowed-host {name!r}: expected a host name such as my-box.lan or an address such as "
                           f"192.168.1.5 or [fe80::1], without a port")
    return tuple(n.strip().lower() for n in names)


def cmd_serve(args) -> int:
    import importlib.util

    from ..policies.base import PolicyError

    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise BadInput(f"toolpath serve needs {' and '.join(missing)}: pip install 'toolpath[serve]'")
    spec = _model_spec(args)
    allowed = _allowed_hosts(getattr(args, "allowed_host", None) or [])
    if not _loopback(args.host):
        error(f"warning: serving on {args.host}: anyone who can reach it may use the model (there is no key); "
              "requests must name it (or a --allowed-host name) in their Host header")
    echo(f"loading {spec.name} …", file=sys.stderr, flush=True)
    from ..serve import build

    try:
        server = build(spec, args.host, args.port, access_log=not args.quiet, model_id=args.model,
                       allowed_hosts=allowed)
    except PolicyError as err:
        error(f"cannot load {args.model}: {err}")
        return EXIT_FAILED
    except OSError as err:  # the port is taken, or the host is not ours
        raise BadInput(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}") from None
    echo(f"serving {args.model} at {server.url} (OpenAI-compatible: GET /models, POST /chat/completions); "
         "Ctrl-C stops", file=sys.stderr, flush=True)
    server.serve()
    return EXIT_OK

"""Which requests reach the routes at all: the Host header and the body's content type, checked as ASGI
middleware in front of every route.

A web page can reach a server on 127.0.0.1 two ways the server never meant to allow: by DNS rebinding (its own
name re-pointed at 127.0.0.1, so the request carries `Host: evil.example`) and by a cross-site "simple"
request (a `text/plain` POST, which a browser sends without asking first). So a request must carry exactly one
Host header naming a loopback host (or a name the user allowed with `--allowed-host`, or the address the
server is bound to), parsed whole so `127.0.0.1:80@evil.com` is not read as ours; and a POST must say its body
is `application/json`, which a browser only sends cross-site after a CORS preflight this server never grants.
"""

from __future__ import annotations

import ipaddress
import json

from ..viewer.server import LOOPBACK_NAMES, host_name
from .chat_request import APIError

BODY_METHODS = {"POST", "PUT", "PATCH"}


def host_names(bound: str, allowed: tuple[str, ...] = ()) -> frozenset[str]:
    """The names a Host header may carry: loopback's, the allowed ones, and the bound address unless it is a
    wildcard (0.0.0.0 or ::, which would admit any name)."""
    names = set(LOOPBACK_NAMES) | {a.strip().lower() for a in allowed}
    try:
        address = ipaddress.ip_address(bound)
    except ValueError:
        names.add(bound.lower())
    else:
        if not address.is_unspecified:
            names.add(f"[{address}]" if address.version == 6 else str(address))
    return frozenset(names)


def host_problem(headers: list[tuple[bytes, bytes]], names: frozenset[str]) -> APIError | None:
    given = [v.decode("latin-1") for k, v in headers if k == b"host"]
    try:
        name = host_name(given)
    except ValueError as why:
        return APIError(400, str(why), code="invalid_host")
    if name not in names:
        host = given[0].strip()
        return APIError(403, f"host {host[:100]!r} is not this server's: use {', '.join(sorted(names))} (start the "
                             f"server with --allowed-host NAME to add a name)", code="host_not_allowed")
    return None


def content_type_problem(scope: dict) -> APIError | None:
    if scope["method"] not in BODY_METHODS:
        return None
    given = [v for k, v in scope["headers"] if k == b"content-type"]
    media = given[0].decode("latin-1").split(";", 1)[0].strip().lower() if len(given) == 1 else ""
    if media != "application/json":
        shown = given[0].decode("latin-1")[:80] if len(given) == 1 else f"{len(given)} Content-Type headers"
        return APIError(415, f"the request body must be sent as Content-Type: application/json, got {shown!r}",
                        code="unsupported_media_type")
    return None


class Gate:
    """ASGI middleware: a request with a foreign Host or a non-JSON body is answered here, in OpenAI's shape."""

    def __init__(self, app, names: frozenset[str]):
        self.app = app
        self.names = names

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            problem = host_problem(scope["headers"], self.names) or content_type_problem(scope)
            if problem is not None:
                body = json.dumps(problem.body()).encode()
                await send({"type": "http.response.start", "status": problem.status,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

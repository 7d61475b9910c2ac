"""Only requests addressed to this machine's loopback reach the MCP server over HTTP.

A web page that re-points its own DNS name at 127.0.0.1 (DNS rebinding) could otherwise drive the server's
tools and sandboxes from a browser. The SDK's own check matches `127.0.0.1:*` by prefix, so it takes
`Host: 127.0.0.1:80@evil.com`; this one parses the header whole, as the viewer does: exactly one Host header,
a loopback name with an optional all-digit port, and an Origin, when a browser sends one, of the same kind.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from ..viewer.server import LOOPBACK_NAMES, host_name


def host_problem(values: list[str]) -> str | None:
    """Why these Host header values are not one loopback host with an optional port; None when they are."""
    try:
        name = host_name(values)
    except ValueError as why:
        return str(why)
    if name not in LOOPBACK_NAMES:
        return f"host {values[0].strip()[:100]!r} is not this server's: address it as 127.0.0.1, localhost or [::1]"
    return None


def origin_problem(values: list[str]) -> str | None:
    """Why these Origin header values are not absent or one http(s) origin on a loopback host; None when so."""
    if not values:
        return None
    if len(values) != 1:
        return f"a request may have one Origin header, this one has {len(values)}"
    origin = values[0].strip()
    try:
        parts = urlsplit(origin)
        authority_ok = parts.scheme in ("http", "https") and not (parts.path or parts.query or parts.fragment)
    except ValueError:
        authority_ok = False
    if not authority_ok or host_problem([parts.netloc]) is not None:
        return f"origin {origin[:100]!r} is not a page of this machine's loopback"
    return None


def loopback_only(app: Any) -> Any:
    """`app` (ASGI) behind the Host and Origin checks: 421 for another host, 403 for another origin, each with
    a JSON-RPC error body that says why."""

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers", [])]
            why = host_problem([v for k, v in headers if k == "host"])
            status = 421
            if why is None:
                why, status = origin_problem([v for k, v in headers if k == "origin"]), 403
            if why is not None:
                body = json.dumps({"jsonrpc": "2.0", "id": None,
                                   "error": {"code": -32600, "message": f"toolpath mcp: {why}"}}).encode()
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded

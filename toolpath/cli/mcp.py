"""`toolpath mcp serve`: the registered tools as an MCP server (stdio, or streamable HTTP on 127.0.0.1)."""

from __future__ import annotations

import math
from pathlib import Path

from .common import EXIT_OK, BadInput, store_from_args

# Each session may hold a sandbox (a kernel, its memory and processes): a bound a machine can carry.
MAX_SESSIONS = 256
MAX_IDLE_SECONDS = 24 * 3600


def _inputs(paths: list[str] | None) -> tuple[list[Path], list[Path]]:
    """--input files, split into images (named image_1, … for the image tools) and other files (read_file)."""
    import mimetypes

    files, images = [], []
    for text in paths or []:
        p = Path(text).expanduser().resolve()
        if not p.is_file():
            raise BadInput(f"--input {text}: no such file")
        (images if (mimetypes.guess_type(p.name)[0] or "").startswith("image/") else files).append(p)
    return files, images


def cmd_mcp_serve(args) -> int:
    import anyio

    from .. import registry
    from ..mcp.server import build_server, log, serve_http, serve_stdio, served_tools
    from ..mcp.sessions import SessionConfig
    from ..tools.registry import ToolError

    names = [n.strip() for part in args.tools or [] for n in part.split(",") if n.strip()]
    try:
        tools = served_tools(names or None)
    except ToolError as err:
        raise BadInput(str(err)) from None
    sandbox = args.sandbox or ("process" if "python" in tools else "none")
    if sandbox != "none" and sandbox not in registry.declared("sandbox"):
        raise BadInput(f"--sandbox {sandbox!r} is not a sandbox kind; available: none, "
                       f"{', '.join(registry.declared('sandbox'))}")
    if not 1 <= args.max_sessions <= MAX_SESSIONS:
        raise BadInput(f"--max-sessions must be 1 to {MAX_SESSIONS}, got {args.max_sessions}")
    if not (math.isfinite(args.session_idle) and 0 < args.session_idle <= MAX_IDLE_SECONDS):
        raise BadInput(f"--session-idle must be more than 0 and at most {MAX_IDLE_SECONDS} seconds, got "
                       f"{args.session_idle:g}")
    files, images = _inputs(args.input)
    config = SessionConfig(inputs=files, images=images, sandbox=sandbox, store=store_from_args(args),
                           max_sessions=args.max_sessions, idle_seconds=args.session_idle)
    server, sessions = build_server(tools, config, one_client=args.http is None)
    what = f"{len(tools)} tools, sandbox {sandbox} per session (at most {args.max_sessions} at once)"
    if args.http is None:
        log(f"serving {what} on stdio")
        anyio.run(serve_stdio, server, sessions)
    else:
        try:
            serve_http(server, sessions, args.http, announce=lambda url: log(f"serving {what} on {url}"))
        except OSError as err:  # the port is taken or not ours to use
            raise BadInput(str(err)) from None
    return EXIT_OK

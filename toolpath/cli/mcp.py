"""`toolpath mcp serve`: the registered tools as an MCP server (stdio, or streamable HTTP on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

from .common import EXIT_OK, BadInput, store_from_args


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
    files, images = _inputs(args.input)
    config = SessionConfig(inputs=files, images=images, sandbox=sandbox, store=store_from_args(args))
    server, sessions = build_server(tools, config, one_client=args.http is None)
    what = f"{len(tools)} tools, sandbox {sandbox} per session"
    if args.http is None:
        log(f"serving {what} on stdio")
        anyio.run(serve_stdio, server, sessions)
    else:
        try:
            serve_http(server, sessions, args.http, announce=lambda url: log(f"serving {what} on {url}"))
        except OSError as err:  # the port is taken or not ours to use
            raise BadInput(str(err)) from None
    return EXIT_OK

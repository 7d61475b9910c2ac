"""toolpath's tools as an MCP server: tools/list from each Tool's schema, tools/call through Tool.call.

A tool's failure (a ToolError, bad arguments, a timeout, a bug in the tool) comes back as a result with
isError set and the message naming the problem, never as a crash of the server: the calling model can read
it and try again. Images a tool returns (artifacts with an image/* type) come back as MCP image content,
after the tool's text. Each call runs in a worker thread so one slow tool does not hold up other sessions; a
call the client cancels has its cell stopped before its session runs another (sessions.py). Over HTTP only
requests addressed to loopback are served (http_guard.py).
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

from ..tools.registry import Tool, ToolError, ToolResult
from .sessions import Session, SessionConfig, SessionLimit, Sessions

# Served unless named: ending a run means nothing to an MCP client, which gets every result back anyway.
NOT_SERVED_BY_DEFAULT = ("final_answer",)
# An image larger than this is named in the text instead of sent inline (MCP messages are held in memory).
MAX_INLINE_IMAGE_BYTES = 16 * 1024 * 1024


def served_tools(names: list[str] | None) -> dict[str, Tool]:
    """The tools to serve: those named (each must exist), else every registered tool but final_answer."""
    from ..tools.registry import get_tool, load_tools

    if names:
        return {n: get_tool(n) for n in names}
    return {n: t for n, t in load_tools().items() if n not in NOT_SERVED_BY_DEFAULT}


def mcp_tool(t: Tool) -> Any:
    import mcp.types as types

    schema = t.schema()
    # The timeout and the priors a planner reads, for clients that plan too; MCP has no field of its own for them.
    meta = {"toolpath/timeout_s": t.timeout, "toolpath/cost_s": t.cost, "toolpath/quality": t.quality}
    return types.Tool(name=t.name, description=t.description or None, input_schema=schema["parameters"], _meta=meta)


def error_result(message: str) -> Any:
    import mcp.types as types

    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def to_mcp_result(result: ToolResult) -> Any:
    """The tool's text first, then each image artifact as image content; other artifacts are named in text."""
    import mcp.types as types

    content: list[Any] = [types.TextContent(text=result.content)]
    for ref in result.artifacts:
        path = Path(ref.path)
        if ref.mime.startswith("image/") and ref.size <= MAX_INLINE_IMAGE_BYTES and path.is_file():
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            content.append(types.ImageContent(data=data, mime_type=ref.mime))
        else:
            content.append(types.TextContent(text=f"[artifact {ref.name or path.name}: {ref.mime}, {ref.size} bytes, "
                                                  f"{ref.path}]"))
    return types.CallToolResult(content=content, is_error=False)


def call_in_session(tool: Tool, arguments: dict, session: Session) -> Any:
    """Run one call (blocking, in a worker thread): the session's sandbox first if it has none yet."""
    try:
        session.open_sandbox()
        result = tool.call(arguments, session.ctx)
    except ToolError as err:
        message = str(err)
        if session.sandbox_error and session.ctx.sandbox is None:
            message += f" ({session.sandbox_error})"
        return error_result(message)
    except Exception as err:  # noqa: BLE001 — a bug in a tool is the caller's error result, not the server's end
        return error_result(f"{tool.name}: {type(err).__name__}: {err}")
    return to_mcp_result(result)


def build_server(tools: dict[str, Tool], config: SessionConfig, one_client: bool = False) -> tuple[Any, Sessions]:
    """The SDK's low-level Server with toolpath's tools, and the sessions it keeps (one for the whole server when
    the transport has `one_client`: stdio)."""
    from importlib.metadata import PackageNotFoundError, version

    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    try:
        ours = version("toolpath")
    except PackageNotFoundError:  # run from a checkout that was never installed
        ours = ""
    sessions = Sessions(config, one_client=one_client)
    listing = [mcp_tool(t) for t in tools.values()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx: Any, params: Any) -> Any:
        tool = tools.get(params.name)
        if tool is None:
            return error_result(f"unknown tool {params.name!r}; this server has: {', '.join(tools)}")
        try:
            session = await sessions.for_request(ctx)
        except SessionLimit as err:
            return error_result(str(err))
        async with session.lock:
            try:
                return await anyio.to_thread.run_sync(session.run, call_in_session, tool,
                                                      dict(params.arguments or {}), session, abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                # The client cancelled or left: its cell is stopped, and the session's next call waits for that
                # (holding the lock), so it never reads the cancelled cell's answer as its own.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(session.stop_call)
                raise

    server = Server("toolpath", version=ours, instructions="toolpath's tools; images come back as image "
                    "content and as names (crop_1, …) later calls can use.", on_list_tools=list_tools,
                    on_call_tool=call_tool)
    return server, sessions


async def serve_stdio(server: Any, sessions: Sessions) -> None:
    from mcp.server.stdio import stdio_server

    stdout = sys.stdout
    try:
        async with stdio_server() as (read_stream, write_stream):
            # The SDK points fd 1 at stderr while it serves; a tool's print() must follow it at once, not sit in
            # sys.stdout's buffer until exit, when fd 1 is the wire again.
            sys.stdout = sys.stderr
            try:
                await server.run(read_stream, write_stream, server.create_initialization_options())
            finally:
                sys.stdout = stdout
    finally:
        sessions.close_all()


def serve_http(server: Any, sessions: Sessions, port: int, announce=None) -> None:
    """Streamable HTTP on 127.0.0.1:PORT/mcp (0: a free port); `announce(url)` once it listens."""
    import socket

    import uvicorn

    from .http_guard import loopback_only

    config = sessions.config
    app = loopback_only(server.streamable_http_app(host="127.0.0.1", max_sessions=config.max_sessions,
                                                   session_idle_timeout=config.idle_seconds))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as err:
        sock.close()
        raise OSError(f"cannot listen on 127.0.0.1:{port}: {err.strerror}") from None
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    http = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    if announce is not None:
        startup = http.startup

        async def started(sockets=None):
            await startup(sockets=sockets)
            announce(url)

        http.startup = started
    try:
        http.run(sockets=[sock])
    finally:
        sessions.close_all()
        sock.close()


def log(message: str) -> None:
    print(f"toolpath mcp: {message}", file=sys.stderr, flush=True)

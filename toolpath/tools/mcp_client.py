"""MCP servers as a tool source: the servers a spec's `mcp_servers` names, their tools as toolpath Tools.

    mcp_servers:
      - name: time
        command: python
        args: [-m, mcp_server_time]
        tools: [get_current_time]     # allow-list; default all
        timeout: 20                   # seconds per call (default 30); start_timeout: to start (default 60)
      - url: http://127.0.0.1:8000/mcp

The official SDK is async and the runtime is sync LangGraph, so the sessions live on one event loop in a
background thread (McpServers); a call from a tool node waits on it with the call's timeout. Each server's
connection is held open by one task from start to close (the SDK's contexts must be left in the task that
entered them). What a server does wrong becomes that call's ToolError, so the agent sees an error observation
and the run goes on: a server that exited (its last stderr lines are quoted), one that does not answer within
the timeout, one that answers with an MCP error or an isError result. A server that cannot start, lacks a
tool its allow-list names, or offers one toolpath will not take (a bad name or schema: mcp_checks.py), stops the
episode before it starts (McpStartError), as a sandbox that cannot start does. A stdio server that writes
anything but JSON-RPC to stdout is broken: its connection ends with one line saying so. What a server sends is
bounded (mcp_checks.py), its stderr is kept as a tail in memory and the processes it started are killed when
its connection closes (mcp_process.py).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import logging
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from .mcp_checks import MAX_BLOB_BYTES, MAX_RESULT_CHARS, blob_too_large, cut_text, name_problem, schema_problem
from .mcp_process import StderrTail, kill_marked, kill_orphaned_servers, new_marker
from .registry import Tool, ToolContext, ToolError, ToolResult

# The time a server gets to end after its session is closed before it is killed, and the SDK's kill (terminate,
# wait, kill, reap: about 6 s at most).
_CLOSE_SECONDS = 5.0
_KILL_SECONDS = 8.0
_STDERR_TAIL = 600  # characters of the last _STDERR_LINES lines a server wrote to stderr, in its errors
_STDERR_LINES = 3
_MAX_BLOB_MB = MAX_BLOB_BYTES // (1024 * 1024)


class McpStartError(ToolError):
    """A server named by the spec could not be started, or does not offer a tool its allow-list names."""


class _AnyArgs(BaseModel):
    # The server's own JSON schema describes the arguments (McpTool.schema); this model only holds them.
    model_config = ConfigDict(extra="allow")


class Connection:
    """One server's session, held open on the background loop by `_hold` until `close`."""

    def __init__(self, spec: Any, loop: asyncio.AbstractEventLoop):
        self.spec = spec
        self.label = spec.name or spec.url or " ".join([spec.command, *spec.args])
        self.loop = loop
        self.session: Any = None
        self.tools: list[Any] = []
        self.ended: str | None = None  # why the connection ended, once it has
        self._stop: asyncio.Event | None = None
        self._held: asyncio.Task | None = None
        self._stderr = StderrTail() if spec.command else None
        self._marker = new_marker() if spec.command else None

    # ---- on the loop ------------------------------------------------------------------------------
    async def _hold(self, ready: asyncio.Future) -> None:
        from contextlib import AsyncExitStack

        self._stop = asyncio.Event()
        try:
            from mcp import ClientSession
            from mcp.types import PaginatedRequestParams

            async with AsyncExitStack() as stack:
                if self._stderr is not None:
                    self._stderr.listen(asyncio.get_running_loop())
                try:
                    streams = await stack.enter_async_context(self._transport())
                finally:
                    if self._stderr is not None:
                        self._stderr.spawned()
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1],
                                                                        message_handler=self._on_message))
                await session.initialize()
                tools, cursor = [], None
                while True:  # a server may page its tools
                    page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.session, self.tools = session, tools
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as err:  # noqa: BLE001 — however it ended, the calls after it must say so
            self.ended = self.ended or _describe(err)
            if not ready.done():
                ready.set_exception(McpStartError(f"MCP server {self.label!r} could not start: {self.ended}"
                                                  + self.stderr_tail()))
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            self.ended = self.ended or "its session ended"
            self.session = None

    async def _on_message(self, message: Any) -> None:
        """A transport fault (a stdout line that is not JSON-RPC): the server is broken; end its connection."""
        if isinstance(message, Exception) and self.ended is None:
            self.ended = (f"it wrote to stdout what is not JSON-RPC ({_describe_bad_line(message)})"
                          if self.spec.command else f"its transport failed ({_describe(message)})")
            if self._held is not None:
                self._held.cancel()

    def _transport(self):
        if self.spec.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(self.spec.url)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        marker, value = self._marker
        params = StdioServerParameters(command=self.spec.command, args=list(self.spec.args),
                                       env={**self.spec.env, marker: value})
        return stdio_client(params, errlog=self._stderr.writer)

    # ---- from the caller's thread -----------------------------------------------------------------
    def start(self) -> None:
        async def begin() -> None:
            ready = asyncio.get_running_loop().create_future()
            self._held = asyncio.ensure_future(self._hold(ready))
            await ready

        future = asyncio.run_coroutine_threadsafe(begin(), self.loop)
        try:
            future.result(timeout=self.spec.start_timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpStartError(f"MCP server {self.label!r} did not answer initialize and tools/list within "
                                f"{self.spec.start_timeout:g} s (its start_timeout)" + self.stderr_tail()) from None

    def call(self, name: str, arguments: dict, timeout: float) -> Any:
        """The server's CallToolResult. Raises ToolError when there is none to give."""
        from mcp import MCPError

        if self.session is None:
            raise ToolError(f"{name}: MCP server {self.label!r} is not running ({self.ended})" + self.stderr_tail())
        session = self.session
        future = asyncio.run_coroutine_threadsafe(session.call_tool(name, arguments), self.loop)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()  # the SDK tells the server the request is cancelled
            raise ToolError(f"{name}: MCP server {self.label!r} did not answer within {timeout:g} s") from None
        except concurrent.futures.CancelledError:
            raise ToolError(f"{name}: MCP server {self.label!r} stopped before answering ({self.ended})"
                            + self.stderr_tail()) from None
        except MCPError as err:
            if self.session is None or getattr(err, "code", None) == -32000:  # CONNECTION_CLOSED
                raise ToolError(f"{name}: MCP server {self.label!r} is gone: {err}" + self.stderr_tail()) from None
            raise ToolError(f"{name}: MCP server {self.label!r} refused the call: {err}") from None
        except Exception as err:  # noqa: BLE001 — a transport error: the agent hears of it, the run goes on
            raise ToolError(f"{name}: MCP server {self.label!r}: {_describe(err)}" + self.stderr_tail()) from None

    def stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        text = self._stderr.text()[-16 * _STDERR_TAIL:].strip()  # a chatty server's log is not read whole
        lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()][-_STDERR_LINES:]
        if not lines:
            return ""
        return f"; its stderr ends: {' | '.join(lines)[-_STDERR_TAIL:]}"

    def close(self) -> None:
        held = self._held
        if held is not None:
            async def finish() -> None:
                if self.session is not None and self._stop is not None:
                    self._stop.set()  # a clean end: the SDK closes the server's stdin (or DELETEs the session)
                    await asyncio.wait([held], timeout=_CLOSE_SECONDS)
                if not held.done():  # never started, or will not stop: on cancel the SDK kills the process tree
                    held.cancel()
                    await asyncio.wait([held], timeout=_KILL_SECONDS)

            try:
                asyncio.run_coroutine_threadsafe(finish(), self.loop).result(timeout=_CLOSE_SECONDS + _KILL_SECONDS + 1)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                print(f"toolpath: MCP server {self.label!r} did not stop", file=sys.stderr)
        if self._marker is not None:
            kill_marked(self._marker[1])  # what it started and left behind (setsid, double fork)
        if self._stderr is not None:
            stderr = self._stderr
            try:
                asyncio.run_coroutine_threadsafe(_call(stderr.close), self.loop).result(timeout=_CLOSE_SECONDS)
            except (RuntimeError, concurrent.futures.TimeoutError):  # the loop is gone: nothing reads any more
                stderr.close()


async def _call(fn) -> None:
    fn()


def _describe_bad_line(err: BaseException) -> str:
    """The start of the line pydantic could not read, from its error (never the SDK's traceback)."""
    errors = getattr(err, "errors", None)
    given = None
    if callable(errors):
        try:
            given = next((e.get("input") for e in errors() if "input" in e), None)
        except Exception:  # noqa: BLE001 — only a nicer message is at stake
            given = None
    shown = given if isinstance(given, (str, bytes)) else str(err).splitlines()[0] if str(err) else type(err).__name__
    return f"{str(shown)[:80]!r}"


class _QuietBadLines(logging.Filter):
    """The SDK logs a traceback for every stdout line it cannot parse; toolpath says it once, in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to parse JSONRPC message")


_QUIET = _QuietBadLines()


def _describe(err: BaseException) -> str:
    """One line for an exception the SDK raised, unwrapping task-group exception groups to their first cause."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    # One line: pydantic's errors span several and end with a link to its documentation.
    text = " ".join(" ".join(line.split()) for line in str(err).splitlines()
                    if line.strip() and not line.strip().startswith("For further information visit"))
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


@dataclass
class McpTool(Tool):
    """A server's tool as a toolpath Tool: its name (with the spec's prefix), description and JSON schema."""

    connection: Connection | None = None
    remote_name: str = ""
    input_schema: dict = field(default_factory=dict)
    _validator: Any = field(default=None, repr=False)  # made on the first call: checking a schema takes ms

    def schema(self) -> dict:
        return {"name": self.name, "description": self.description, "parameters": self.input_schema}

    def validate(self, arguments: Any) -> Any:
        if not isinstance(arguments, dict):
            raise ToolError(f"{self.name}: arguments must be a JSON object, got {type(arguments).__name__}")
        try:
            if self._validator is None:
                self._validator = _validator(self.input_schema)
            problems = _schema_problems(self._validator, arguments)
        except (RecursionError, MemoryError):  # schemas are checked at start (mcp_checks); never a raw trace
            raise ToolError(f"{self.name}: its input schema could not be checked against these arguments (it "
                            f"nests too deep); the call was not sent") from None
        if problems:
            raise ToolError(f"{self.name}: bad arguments: " + "; ".join(problems))
        return arguments

    def call(self, arguments: Any, ctx: ToolContext | None = None) -> ToolResult:
        args = self.validate(arguments)
        timeout = self._timeout(ctx) or self.timeout or 30.0
        result = self.connection.call(self.remote_name, args, timeout)
        return to_tool_result(self.name, result, ctx)


def _validator(schema: dict) -> Any:
    """A jsonschema validator of the server's schema; False when jsonschema cannot read it (the server checks)."""
    try:
        from jsonschema import exceptions, validators

        cls = validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema)
    except (ImportError, exceptions.SchemaError):
        return False


def _schema_problems(validator: Any, arguments: dict) -> list[str]:
    """What the server's schema says is wrong with the arguments (at most 5), checked here so the model hears
    it by field."""
    if validator is False:
        return []
    out = []
    for err in sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))[:5]:
        where = ".".join(str(p) for p in err.path) or "arguments"
        out.append(f"{where}: {err.message}")
    return out


def to_tool_result(name: str, result: Any, ctx: ToolContext | None) -> ToolResult:
    """An MCP CallToolResult as a ToolResult: text joined; images kept as artifacts and named (NAME_1, …) so the
    image tools can use them; an isError result is a ToolError carrying the server's text."""
    texts, artifacts = [], []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio") and blob_too_large(block.data):
            texts.append(f"[{kind}: {block.mime_type}, about {blob_too_large(block.data)} bytes, not kept: over "
                         f"the {_MAX_BLOB_MB} MB a result's {kind} may have]")
        elif kind in ("image", "audio"):
            raw = base64.b64decode(block.data)
            if kind == "image" and ctx is not None and ctx.save_artifact is not None:
                n = sum(1 for k in ctx.images if k.startswith(name + "_")) + 1
                image_name = f"{name}_{n}"
                ref = ctx.artifact(raw, name=f"{image_name}{_suffix(block.mime_type)}", mime=block.mime_type)
                from pathlib import Path

                ctx.images[image_name] = Path(ref.path)
                artifacts.append(ref)
                texts.append(f"[image {image_name}: {block.mime_type}, {len(raw)} bytes]")
            elif ctx is not None and ctx.save_artifact is not None:
                artifacts.append(ctx.artifact(raw, name=f"{name}-{kind}", mime=block.mime_type))
                texts.append(f"[{kind}: {block.mime_type}, {len(raw)} bytes]")
            else:
                texts.append(f"[{kind}: {block.mime_type}, {len(raw)} bytes, not kept: no artifact store]")
        elif kind == "resource":
            res = block.resource
            texts.append(getattr(res, "text", None) or f"[resource {res.uri}: {getattr(res, 'mime_type', '')}]")
        elif kind == "resource_link":
            texts.append(f"[resource {block.uri}]")
    data = result.structured_content
    if data is not None:
        shown = json.dumps(data, ensure_ascii=False, default=str)
        if len(shown) > MAX_RESULT_CHARS:  # kept as text below, cut; never whole in the step's data
            data = None
        if not texts:
            texts.append(shown)
    content = cut_text("\n".join(texts), f"MCP server's result for {name}")
    if result.is_error:
        raise ToolError(f"{name}: {content or 'the server reported an error and said nothing more'}")
    return ToolResult(content=content, artifacts=artifacts, data=data)


def _suffix(mime: str) -> str:
    import mimetypes

    return mimetypes.guess_extension(mime) or ""


class McpServers:
    """The spec's servers for one episode: `start()` connects them all and returns their tools; `close()`
    stops them and the loop thread. Usable as a context manager."""

    def __init__(self, specs: list[Any]):
        self.specs = specs
        self.connections: list[Connection] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> list[McpTool]:
        try:
            import mcp  # noqa: F401
        except ImportError:
            raise McpStartError("mcp_servers needs the official MCP SDK: pip install 'toolpath[mcp]' "
                                "(or pip install mcp)") from None
        logging.getLogger("mcp.client.stdio").addFilter(_QUIET)
        kill_orphaned_servers()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="toolpath-mcp", daemon=True)
        self._thread.start()
        tools: list[McpTool] = []
        try:
            for spec in self.specs:
                conn = Connection(spec, self.loop)
                self.connections.append(conn)
                conn.start()
                tools += self._tools_of(conn)
        except BaseException:
            self.close()
            raise
        return tools

    @staticmethod
    def _tools_of(conn: Connection) -> list[McpTool]:
        for t in conn.tools:  # a server that offers a name no prompt or record can carry is broken
            if name_problem(t.name):
                raise McpStartError(f"MCP server {conn.label!r} {name_problem(t.name)}")
        offered = {t.name: t for t in conn.tools}
        wanted = conn.spec.tools if conn.spec.tools is not None else list(offered)
        missing = [n for n in wanted if n not in offered]
        if missing:
            raise McpStartError(f"MCP server {conn.label!r} has no tool {', '.join(map(repr, missing))}; it offers: "
                                f"{', '.join(offered) or 'none'}")
        out = []
        for n in wanted:
            t = offered[n]
            schema = t.input_schema or {"type": "object"}
            problem = schema_problem(schema)
            if problem:
                raise McpStartError(f"MCP server {conn.label!r}: its tool {n!r} {problem}")
            schema = dict(schema)
            out.append(McpTool(name=conn.spec.prefix + n, description=t.description or "", fn=_not_direct,
                               args_model=_AnyArgs, timeout=conn.spec.timeout, cost=0.1, quality=0.8, ctx_param=None,
                               tags=("mcp",), connection=conn, remote_name=n, input_schema=schema))
        return out

    def close(self) -> None:
        for conn in self.connections:
            try:
                conn.close()
            except Exception as err:  # noqa: BLE001 — one server that fails to stop must not keep the others
                print(f"toolpath: MCP server {conn.label!r} did not stop cleanly: {_describe(err)}", file=sys.stderr)
        self.connections = []
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=_KILL_SECONDS)
            if not self.loop.is_running():
                self.loop.close()
            self.loop = None

    def __enter__(self) -> list[McpTool]:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _not_direct(**kwargs: Any) -> Any:
    raise ToolError("an MCP tool runs on its server, through McpTool.call")

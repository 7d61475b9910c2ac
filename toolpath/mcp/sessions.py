"""What one MCP session owns: a ToolContext of its own (inputs, named images, artifacts) and its own sandbox.

Two clients of one server never see each other's kernel variables or images, as two episodes never do. The
sandbox is started on the session's first call (listing tools costs nothing) and closed when the session
ends. Over stdio the server has one client, so the session is the process's and ends with it. Over HTTP it is
the connection's: the SDK unwinds each connection's exit stack when the client sends DELETE or the session
idles out; a client on the sessionless protocol (2026-07-28) has a connection, and so a session, per request.
Calls within a session run one at a time, in order, as an agent's do; a call the client cancels stops its
cell (interrupt.py) before the session takes its next one, so no call ever reads another's answer.

A server holds at most `max_sessions` sessions (and so sandboxes) at once: the SDK answers 503 to a client
that would open one more over HTTP, and a call that would make one more on any other path (the sessionless
protocol makes one per request) is refused with a result that says so. The SDK ends an HTTP session that has
had no request in flight for `idle_seconds` (a client that left without DELETE), which closes its sandbox.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..tools.registry import ToolContext

_ids = itertools.count(1)


@dataclass
class SessionConfig:
    """What every session starts from: the server's input files and images, the sandbox kind, the store."""

    inputs: list[Path] = field(default_factory=list)
    images: list[Path] = field(default_factory=list)
    sandbox: str = "none"
    sandbox_options: dict = field(default_factory=dict)
    store: Any = None  # the run store whose artifact folder keeps the images tools return
    max_sessions: int = 8  # sessions (each with its sandbox) open at once
    idle_seconds: float = 300.0  # an HTTP session with no request in flight this long is ended
    # How long a cancelled cell has to end on SIGINT before its kernel is killed, and how long after that the
    # call's thread is waited for (a kernel's restart included) before the session goes on regardless.
    interrupt_grace: float = 2.0
    stop_wait: float = 60.0


class SessionLimit(Exception):
    """The server already has as many sessions open as it may."""


class Session:
    def __init__(self, config: SessionConfig):
        import anyio

        self.config = config
        self.id = f"mcp-{next(_ids)}"
        self.ctx = ToolContext(run_id=self.id, inputs=list(config.inputs) + list(config.images),
                               save_artifact=config.store.put_artifact if config.store is not None else None,
                               images={f"image_{i}": p for i, p in enumerate(config.images, 1)})
        self.lock = anyio.Lock()  # one call at a time: a kernel runs one cell, tools name images in order
        self.sandbox_error: str | None = None
        self._opened = False
        self._idle = threading.Event()  # set while no call of this session runs in a worker thread
        self._idle.set()

    def run(self, fn, *args):
        """fn(*args) as this session's running call (blocking, in a worker thread), so stop_call can end it."""
        self._idle.clear()
        try:
            return fn(*args)
        finally:
            self._idle.set()

    def stop_call(self) -> None:
        """End the running call, if any, and wait until its thread is done (blocking): SIGINT to its cell, then
        SIGKILL to a cell that ignored it for interrupt_grace seconds (the sandbox restarts its kernel)."""
        from .interrupt import interrupt_cell, kill_cell

        for stop in (interrupt_cell, kill_cell):
            end = time.monotonic() + self.config.interrupt_grace
            # The call may still be starting its sandbox: signal the cell once there is one to signal.
            while not self._idle.is_set() and time.monotonic() < end:
                box = self.ctx.sandbox
                if box is not None and stop(box):
                    break
                self._idle.wait(0.05)
            if self._idle.wait(max(0.0, end - time.monotonic())):
                return
        if not self._idle.wait(self.config.stop_wait):
            print(f"toolpath mcp: {self.id}: a cancelled call did not end; the session goes on without it",
                  file=sys.stderr)

    def open_sandbox(self) -> None:
        """Start the session's sandbox (blocking; called in a worker thread on the first call). A sandbox that
        cannot start is remembered: the tools that need it say why, the others still work."""
        if self._opened or self.config.sandbox == "none":
            return
        self._opened = True
        from ..agents.episode import open_sandbox
        from ..sandboxes.base import SandboxError, stage_inputs

        try:
            box = open_sandbox(self.config.sandbox, self.config.sandbox_options)
        except (SandboxError, OSError, TypeError, ValueError) as err:
            self.sandbox_error = f"sandbox {self.config.sandbox!r} could not start: {err}"
            print(f"toolpath mcp: {self.id}: {self.sandbox_error}", file=sys.stderr)
            return
        try:
            stage_inputs(box, self.ctx.inputs, self.ctx.images)
        except Exception:
            box.close()
            raise
        self.ctx.sandbox = box

    def close(self) -> None:
        self.stop_call()  # a sandbox is never closed under a cell that still runs in it
        box, self.ctx.sandbox = self.ctx.sandbox, None
        if box is not None:
            box.close()


class Sessions:
    """The live sessions of one server, one per MCP connection."""

    KEY = "toolpath.session"

    def __init__(self, config: SessionConfig, one_client: bool = False):
        """`one_client`: the transport has one client for the server's life (stdio), so one session serves every
        request, on whichever protocol era; it is closed when the server stops."""
        self.config = config
        self.one_client = one_client
        self.open: dict[str, Session] = {}

    async def for_request(self, request_ctx: Any) -> Session:
        """The session of the connection this request came on, made (and its closing registered) on first use."""
        import anyio

        # The SDK gives handlers the connection only through the session object; without it (a future SDK)
        # every request shares one session, closed when the server stops.
        connection = None if self.one_client else getattr(request_ctx.session, "_connection", None)
        if connection is None:
            if "shared" not in self.open:
                self.open["shared"] = Session(self.config)
            return self.open["shared"]
        if self.KEY in connection.state:
            return connection.state[self.KEY]
        if len(self.open) >= self.config.max_sessions:
            raise SessionLimit(f"this server already has {len(self.open)} sessions open, its limit "
                               f"(toolpath mcp serve --max-sessions); try again when one has ended")
        session = connection.state[self.KEY] = Session(self.config)
        self.open[session.id] = session

        async def close() -> None:
            self.open.pop(session.id, None)
            await anyio.to_thread.run_sync(session.close)

        connection.exit_stack.push_async_callback(close)
        return session

    def close_all(self) -> None:
        """What is still open when the server stops."""
        for session in list(self.open.values()):
            session.close()
        self.open.clear()

"""What a stdio MCP server process leaves on this machine, kept bounded and cleaned up.

A server's stderr goes through a pipe into the last STDERR_KEEP bytes in memory (a server that writes without
end costs nothing more), for the error lines that quote it. Every process the server starts carries a marker in
its environment (sandboxes/leftovers.py's markers); when the server's connection closes, whatever still carries
it, or descends from what does, is killed: the SDK kills the server's process group, and a child that left it
(setsid, a double fork) would otherwise outlive the run. What a killed host left is killed at the next start.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from ..sandboxes.leftovers import kill_orphans, kill_tree, marked_pids, owner_marker

STDERR_KEEP = 64 * 1024
MARKER = "TOOLPATH_MCP_SERVER"


class StderrTail:
    """A pipe for a server's stderr, read on the event loop into its last `keep` bytes."""

    def __init__(self, keep: int = STDERR_KEEP):
        self.keep = keep
        self._r, w = os.pipe()
        os.set_blocking(self._r, False)
        self.writer = os.fdopen(w, "w")  # given to the server as its stderr; closed here once it is spawned
        self._tail = bytearray()
        self._loop = None

    def listen(self, loop) -> None:
        """Start reading on `loop` (call on the loop's thread)."""
        self._loop = loop
        loop.add_reader(self._r, self._read)

    def spawned(self) -> None:
        """The server has its own copy of the write end: let ours go, so the pipe ends when the server's does."""
        if not self.writer.closed:
            self.writer.close()

    def _read(self) -> None:
        try:
            chunk = os.read(self._r, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._stop_reading()
            return
        self._tail += chunk
        if len(self._tail) > self.keep:
            del self._tail[:len(self._tail) - self.keep]

    def _stop_reading(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._r)
            self._loop = None

    def text(self) -> str:
        return self._tail.decode("utf-8", errors="replace")

    def close(self) -> None:
        """Stop reading and release both ends (on the loop's thread, or after the loop has stopped)."""
        self._stop_reading()
        self.spawned()
        if self._r >= 0:
            os.close(self._r)
            self._r = -1


def new_marker() -> tuple[str, str]:
    """(variable, value) to put in a server's environment: this process's pid, then a token of its own."""
    return MARKER, owner_marker(uuid.uuid4().hex)


def _processes() -> dict[int, int]:
    """Every process's parent, from /proc (one that ends while we read is skipped)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def descendants(pid: int) -> list[int]:
    """The pids of every process below `pid`, nearest first."""
    parents = _processes()
    found, frontier = [], {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - set(found)
        found += sorted(frontier)
    return found


def kill_marked(value: str, rounds: int = 5) -> int:
    """SIGKILL every process marked with `value`, and all below it, again while any is left (one may fork as
    it goes); how many marked ones there were."""
    killed = 0
    for _ in range(rounds):
        pids = marked_pids(MARKER, value)
        if not pids:
            break
        for pid in pids:
            kill_tree(pid)
        killed += len(pids)
    return killed


def kill_orphaned_servers() -> int:
    """Kill what servers started by a host that was itself killed (kill -9 runs no close) left running."""
    return kill_orphans(MARKER)

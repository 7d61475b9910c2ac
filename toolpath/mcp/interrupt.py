"""Stopping the cell a session's kernel is running, from outside the thread that waits for its answer.

A client that cancels a call (MCP notifications/cancelled, or a client that goes) must not leave its cell
running: the session's next call would find the kernel busy and read the abandoned cell's answer as its own.
The kernel is told first with SIGINT, which ends the cell with KeyboardInterrupt and keeps the session's
variables; a cell that ignores it is killed (the sandbox then starts a fresh kernel and says so in the
waiting call's result). The kernel is found on the host as every process under the sandbox's launcher (the
kernel and anything its cell started), or as the unisolated kernel process itself.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from ..tools.mcp_process import descendants


def cell_processes(box: Any) -> list[int]:
    """The host pids running the sandbox's current cell: all below its launcher, or the unisolated kernel and
    what it started. Empty where the kernel is not a process of this host we can see (a remote engine)."""
    launcher = getattr(box, "_root_pid", None)  # the launcher's host pid (KernelSandbox; bwrap, unshare, docker)
    if launcher:
        return descendants(launcher)
    proc = getattr(box, "proc", None)
    if getattr(box, "isolation", None) == "unisolated" and proc is not None and proc.poll() is None:
        return [proc.pid, *descendants(proc.pid)]
    return []


def signal_cell(box: Any, sig: int) -> int:
    """Send `sig` to the processes of the sandbox's cell; how many there were."""
    pids = cell_processes(box)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    return len(pids)


def interrupt_cell(box: Any) -> int:
    return signal_cell(box, signal.SIGINT)


def kill_cell(box: Any) -> int:
    return signal_cell(box, signal.SIGKILL)

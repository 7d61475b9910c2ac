"""What every store shares: run ids, whether a run's process still lives, and its error."""

from __future__ import annotations

import os
import time
import uuid


class StoreError(RuntimeError):
    """The store cannot be opened (a TOOLPATH_DB that names no reachable PostgreSQL server, a bad URL, a home
    that cannot be written), or a write was asked of a store opened read-only."""


def new_id(prefix: str = "") -> str:
    # Time-ordered so `runs list` sorts naturally; the random tail keeps parallel runs apart.
    return f"{prefix}{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def pid_alive(pid: int | None) -> bool:
    """Whether process `pid` of this machine is running (a zombie is not: it has exited)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """An exited process its parent has not collected yet runs nothing. An orphan's new parent may never
    collect it (pid 1 of a container that is not an init), so it would look alive forever."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):  # no /proc (not Linux): as os.kill said, alive
        return False


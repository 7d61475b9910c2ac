"""What a sandbox leaves on the host when its host process is killed (kill -9 runs no cleanup), found and removed
by the next sandbox that starts: temp folders named after their owner's pid, and processes that carry a marker
naming their owner's pid in their environment (an X server, the apps on it)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

from ..runs import pid_alive


def private_folder(prefix: str) -> Path:
    """A new host folder only this user can enter (0700), named after this process, made after removing the
    folders of that prefix whose process has died (a host killed before it could clean up)."""
    tmp = Path(tempfile.gettempdir())
    for old in tmp.glob(f"{prefix}*-*"):
        m = re.fullmatch(rf"{re.escape(prefix)}(\d+)-\w+", old.name)
        try:
            ours = m is not None and not old.is_symlink() and old.lstat().st_uid == os.getuid()
        except OSError:
            continue
        if ours and not pid_alive(int(m.group(1))):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def owner_marker(token: str) -> str:
    """A marker's value for what a sandbox starts: its owner's pid (this process), then the sandbox's token."""
    return f"{os.getpid()}-{token}"


def marked_pids(name: str, value: str | None = None) -> dict[int, str]:
    """Processes whose environment has `name` (= `value`, when given): {pid: the marker's value}."""
    needle = f"{name}=".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        for item in env.split(b"\0"):
            if item.startswith(needle):
                got = item[len(needle):].decode(errors="replace")
                if value is None or got == value:
                    found[int(entry.name)] = got
                break
    return found


def kill_orphans(name: str) -> int:
    """SIGKILL every process marked with `name` whose owner (the pid the marker starts with) has died; how many."""
    killed = 0
    for pid, value in marked_pids(name).items():
        owner = value.split("-", 1)[0]
        if owner.isdigit() and not pid_alive(int(owner)):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and all its descendants (a browser driver and the Chromium it launched)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(children.get(p, []))
    for p in seen:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass

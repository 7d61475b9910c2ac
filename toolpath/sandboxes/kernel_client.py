"""The host side of kernel.py's protocol, shared by every sandbox that runs the kernel (process, docker).

`KernelSandbox` holds everything but how a kernel is started, killed and explained when it dies: the request
pipe, preloading, running a cell, reading its answer, and restarting after a crash or a timeout. A subclass
implements `_spawn_kernel`, `_kill` and `_death`.
"""

from __future__ import annotations

import json
import os
import select
import time
from dataclasses import dataclass, field
from pathlib import Path

from .base import SandboxError, SandboxLimits

# Where the episode's folder appears inside a sandbox. Not /work: a checkout (and its .venv, which the
# kernel needs) may live under /work on the host, and a mount there would hide it.
INSIDE = "/episode"
KERNEL = Path(__file__).with_name("kernel.py")
NOBODY = 65534
# What the kernel's environment holds: nothing of the host's (no API keys), only this.
KERNEL_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": INSIDE, "MPLBACKEND": "Agg",
              "PYTHONDONTWRITEBYTECODE": "1", "MPLCONFIGDIR": "/tmp/matplotlib"}


@dataclass
class CellResult:
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    error: str | None = None
    images: list[Path] = field(default_factory=list)  # host paths of PNG files in the work folder
    notes: list[str] = field(default_factory=list)  # what the sandbox did: truncation, restarts, isolation

    @property
    def ok(self) -> bool:
        return self.error is None


class KernelPipe:
    """JSON requests written to one fd, JSON lines read from another.

    Both fds are non-blocking, so a kernel that stops reading or writing costs at most the timeout (a blocking
    write of a large request to a kernel that no longer reads would hang the host). A closed kernel end reads
    as EOFError."""

    def __init__(self, write_fd: int | None, read_fd: int):
        for fd in (write_fd, read_fd):
            if fd is not None:
                os.set_blocking(fd, False)
        self.write_fd, self.read_fd, self._buf = write_fd, read_fd, b""

    def read(self, timeout: float) -> dict | None:
        """The next response, or None when none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                return None
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                raise EOFError
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def request(self, req: dict, timeout: float) -> dict | None:
        """Send one request and wait for its response, `timeout` seconds for both together."""
        deadline = time.monotonic() + timeout
        data = (json.dumps(req) + "\n").encode()
        while data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [self.write_fd], [], left)[1]:
                return None
            try:
                data = data[os.write(self.write_fd, data):]
            except BlockingIOError:
                continue
            except OSError:  # EPIPE: no reader left, the kernel is gone
                raise EOFError from None
        return self.read(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        for fd in (self.write_fd, self.read_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.write_fd = None


def host_image_paths(reported: list, inside: str, workdir: Path, limit: int, notes: list[str]) -> list[Path]:
    """Host paths of the images the kernel reports under `inside` (its view of `workdir`). The kernel runs user
    code, so its answer is untrusted: only regular files inside the work folder are taken, never a symlink out."""
    prefix = inside.rstrip("/") + "/"
    root = Path(workdir).resolve()
    out = []
    for p in reported[:limit]:
        host = Path(workdir) / p[len(prefix):] if isinstance(p, str) and p.startswith(prefix) else None
        if host is None or host.is_symlink() or not host.is_file() or root not in host.resolve().parents:
            notes.append(f"image {str(p)[:80]!r} was refused: not a file in the episode's work folder")
            continue
        out.append(host)
    return out


def fill_result(result: CellResult, res: dict, limits: SandboxLimits, inside: str, workdir: Path) -> CellResult:
    """A kernel's answer to one cell, as a CellResult with a note for everything that was cut or refused."""
    result.stdout, result.stderr = res.get("stdout", ""), res.get("stderr", "")
    result.value, result.error = res.get("value"), res.get("error")
    for stream in ("stdout", "stderr"):
        if res.get(f"{stream}_truncated"):
            result.notes.append(f"{stream} was cut to {limits.output_bytes} of {res[f'{stream}_bytes']} bytes")
    result.images = host_image_paths(res.get("images") or [], inside, workdir, limits.images, result.notes)
    if res.get("images_dropped"):
        result.notes.append(f"{res['images_dropped']} more image(s) were not returned (limit {limits.images})")
    return result


class KernelSandbox:
    """A stateful Python kernel for one episode. Use as a context manager."""

    limits: SandboxLimits
    workdir: Path

    def __init__(self) -> None:
        self._pipe: KernelPipe | None = None
        self.restarts = 0
        self._preload = ""

    # ---- what a subclass provides ---------------------------------------------------------------------
    @property
    def inside(self) -> str:
        """Where the kernel sees the work folder."""
        return INSIDE

    def _spawn_kernel(self) -> None:
        """Start a kernel and set self._pipe once it said it is ready; SandboxError if it does not start."""
        raise NotImplementedError

    def _kill(self) -> None:
        """Stop the kernel and everything it started; close self._pipe."""
        raise NotImplementedError

    def _death(self) -> str:
        """Why the kernel stopped answering (exit status, limits it hit), for the result."""
        raise NotImplementedError

    def _notes(self) -> list[str]:
        """Notes every result carries (the unisolated mode says so)."""
        return []

    # ---- shared -----------------------------------------------------------------------------------------
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _spawn(self) -> None:
        self._spawn_kernel()
        if self._preload:
            self._set(self._preload)

    def _restart(self, why: str, result: CellResult) -> CellResult:
        self._kill()
        self.restarts += 1
        result.notes.append(f"{why}; the kernel was restarted and its variables are lost")
        self._spawn()
        return result

    def _set(self, code: str) -> None:
        try:
            res = self._pipe.request({"op": "set", "code": code}, timeout=30.0)
        except EOFError:
            res = None
        if res is None or not res.get("ok"):
            raise SandboxError("preloading the kernel failed: " + ((res or {}).get("error") or "no answer").strip())

    def preload(self, code: str) -> None:
        """Code run in the namespace now and after every restart (task images as image_1, image_2, …)."""
        if self._pipe is None:
            raise SandboxError("the sandbox is not started")
        self._set(code)
        self._preload += code + "\n"

    def run(self, code: str, timeout: float | None = None) -> CellResult:
        """Run one cell. Crashes and timeouts are reported in the result; the kernel is restarted."""
        if self._pipe is None:
            raise SandboxError("the sandbox is not started")
        timeout = timeout or self.limits.cell_seconds
        result = CellResult(notes=self._notes())
        req = {"code": code, "output_cap": self.limits.output_bytes, "image_limit": self.limits.images}
        try:
            res = self._pipe.request(req, timeout)
        except EOFError:
            result.error = self._death()
            return self._restart(result.error, result)
        if res is None:
            result.error = f"the cell ran past its {timeout:g} s limit"
            return self._restart(result.error, result)
        return fill_result(result, res, self.limits, self.inside, self.workdir)

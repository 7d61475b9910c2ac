"""The host side of kernel.py's protocol, shared by every sandbox that runs the kernel (process, docker).

`KernelSandbox` holds everything but how a sandbox is built and torn down: the launcher's control socket,
starting a kernel through it, preloading, running a cell, checking each answer, and restarting after a crash,
a timeout or a broken protocol. A subclass implements `_start_box` (build the sandbox with kernel.py's
launcher as its first process; set `_control` and `_root_pid`), `_stop_box` and `_startup_log`.

The protocol is checked, not trusted. User code runs in the kernel's own process, so it can always write to the
answer pipe; what the host guarantees is that it never pairs a request with another request's answer. Each
request carries a fresh random id that its answer must repeat; an answer must be one JSON object of exactly the
expected fields and types, on one line of bounded length, and nothing may arrive that no request asked for
(checked before each request is sent). Any violation (a line that is not JSON, a wrong shape, a stray line, an
answer for another request) costs the kernel: it is restarted and the result says why. A forged answer with the
current id (user code can read it from the kernel's memory) tells the host no more than the cell could print;
the kernel's own answer then arrives as a second one, and the kernel is restarted before the next cell runs.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import socket
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from .base import SandboxError, SandboxLimits
from .leftovers import private_folder

# Where the episode's folder appears inside a sandbox. Not /work: a checkout (and its .venv, which the
# kernel needs) may live under /work on the host, and a mount there would hide it.
INSIDE = "/episode"
KERNEL = Path(__file__).with_name("kernel.py")
NOBODY = 65534
# What the kernel's environment holds: nothing of the host's (no API keys), only this.
KERNEL_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": INSIDE, "MPLBACKEND": "Agg",
              "PYTHONDONTWRITEBYTECODE": "1", "MPLCONFIGDIR": "/tmp/matplotlib"}
# The launcher's arguments after `kernel.py launch`, less how it reaches the host (--control or --connect).
LAUNCH_ARGS = ["--images", f"{INSIDE}/.images", "--log", f"{INSIDE}/.kernel.log"]

_TEXT = (str, type(None))
RUN_ANSWER = {"id": str, "stdout": str, "stderr": str, "value": _TEXT, "error": _TEXT, "stdout_truncated": bool,
              "stderr_truncated": bool, "stdout_bytes": int, "stderr_bytes": int, "images": list,
              "images_dropped": int, "no_space": bool}
SET_ANSWER = {"id": str, "ok": bool, "error": _TEXT}
READY = {"ready": bool, "pid": int}


class ProtocolError(SandboxError):
    """The kernel's answer pipe carried something other than the answer the host waits for."""


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


def _shown(data: bytes) -> str:
    return repr(data[:60]) + ("…" if len(data) > 60 else "")


class KernelPipe:
    """JSON requests written to one fd, JSON lines read from another.

    Both fds are non-blocking, so a kernel that stops reading or writing costs at most the timeout (a blocking
    write of a large request to a kernel that no longer reads would hang the host). A closed kernel end reads
    as EOFError; a line longer than `max_line` bytes, or one that is not a JSON object, is a ProtocolError."""

    def __init__(self, write_fd: int | None, read_fd: int, max_line: int = 1 << 20):
        for fd in (write_fd, read_fd):
            if fd is not None:
                os.set_blocking(fd, False)
        self.write_fd, self.read_fd, self.max_line, self._buf = write_fd, read_fd, max_line, b""

    def _fill(self) -> bool:
        """Append what the kernel has written (without waiting); False if nothing was there."""
        try:
            chunk = os.read(self.read_fd, 1 << 16)
        except BlockingIOError:
            return False
        if not chunk:
            raise EOFError
        self._buf += chunk
        return True

    def read(self, timeout: float) -> dict | None:
        """The next line as a JSON object, or None when none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            if len(self._buf) > self.max_line:
                raise ProtocolError(f"a line longer than {self.max_line} bytes ({_shown(self._buf)})")
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                return None
            self._fill()
        line, _, self._buf = self._buf.partition(b"\n")
        if len(line) > self.max_line:
            raise ProtocolError(f"a line longer than {self.max_line} bytes ({_shown(line)})")
        try:
            msg = json.loads(line)
        except ValueError:
            raise ProtocolError(f"a line that is not JSON: {_shown(line)}") from None
        if not isinstance(msg, dict):
            raise ProtocolError(f"a line that is not a JSON object: {_shown(line)}")
        return msg

    def stray(self) -> bytes:
        """What the kernel wrote that nobody has read yet (read now, without waiting); b'' when nothing."""
        try:
            while self._fill() and len(self._buf) <= self.max_line:
                pass
        except EOFError:  # a kernel that died after its last answer: the next request finds out
            pass
        return self._buf

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


def check_answer(msg: dict, shape: dict, rid: str | None = None) -> dict:
    """`msg` unless it lacks a field of `shape`, has one more, has one of the wrong type, or answers another
    request than `rid`: then a ProtocolError saying which."""
    if set(msg) != set(shape):
        raise ProtocolError(f"an answer with the fields {sorted(msg)[:20]}, expected {sorted(shape)}")
    for name, kind in shape.items():
        value = msg[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ProtocolError(f"an answer whose {name} is {type(value).__name__}")
    if rid is not None and msg["id"] != rid:
        raise ProtocolError("an answer for another request")
    return msg


def read_beneath(root: Path, relative: str, max_bytes: int) -> bytes | None:
    """The bytes of the regular file `relative` under `root`, opened one name at a time from `root` without
    following any symlink, so that nothing the sandbox changes meanwhile can point the host anywhere else. None
    when it is not such a file (or is larger than `max_bytes`)."""
    names = relative.split("/")
    if any(n in ("", ".", "..") for n in names):
        return None
    fds = []
    try:
        fds.append(os.open(root, os.O_PATH | os.O_DIRECTORY))
        for name in names[:-1]:
            fds.append(os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fds.append(os.open(names[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fds[-1]))
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            return None
        with os.fdopen(os.dup(fds[-1]), "rb") as f:
            data = f.read(max_bytes + 1)
        return data if len(data) <= max_bytes else None
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def host_image_paths(reported: list, inside: str, workdir: Path, limit: int, notes: list[str], outbox: Path,
                     max_bytes: int = 64 << 20) -> list[Path]:
    """Host copies, in `outbox`, of the images the kernel reports under `inside` (its view of `workdir`). The
    kernel runs user code, so its answer is untrusted: only regular files inside the work folder are taken,
    reached without following a symlink, and copied at once: what the host keeps is what it checked."""
    prefix = inside.rstrip("/") + "/"
    out = []
    for p in reported[:limit]:
        data = read_beneath(Path(workdir), p[len(prefix):], max_bytes) \
            if isinstance(p, str) and p.startswith(prefix) else None
        if data is None:
            notes.append(f"image {str(p)[:80]!r} was refused: not a file in the episode's work folder")
            continue
        copy = outbox / f"{len(os.listdir(outbox)) + 1}-{os.path.basename(p)}"
        copy.write_bytes(data)
        out.append(copy)
    return out


def fill_result(result: CellResult, res: dict, limits: SandboxLimits, inside: str, workdir: Path,
                outbox: Path) -> CellResult:
    """A kernel's answer to one cell, as a CellResult with a note for everything that was cut or refused."""
    result.stdout, result.stderr = res.get("stdout", ""), res.get("stderr", "")
    result.value, result.error = res.get("value"), res.get("error")
    for stream in ("stdout", "stderr"):
        if res.get(f"{stream}_truncated"):
            result.notes.append(f"{stream} was cut to {limits.output_bytes} of {res[f'{stream}_bytes']} bytes")
    result.images = host_image_paths(res.get("images") or [], inside, workdir, limits.images, result.notes, outbox,
                                     limits.file_size_mb << 20)
    if res.get("images_dropped"):
        result.notes.append(f"{res['images_dropped']} more image(s) were not returned (limit {limits.images})")
    if res.get("no_space"):
        result.notes.append(f"a write failed for lack of space: {inside}, /tmp and /dev/shm hold at most "
                            f"{limits.disk_mb} MB each (sandbox option disk_mb); delete files there to make room")
    return result


class KernelSandbox:
    """A stateful Python kernel for one episode. Use as a context manager."""

    limits: SandboxLimits
    start_seconds: float = 30.0  # how long a kernel may take to say it is ready

    def __init__(self) -> None:
        self._pipe: KernelPipe | None = None
        self._control: socket.socket | None = None  # to the sandbox's launcher
        self._root_pid: int | None = None  # host pid of the launcher: /proc/<pid>/root is the sandbox's root
        self._kernel_pid: int | None = None  # the running kernel's pid inside the sandbox
        self._reports = b""  # what the launcher said and nobody has read yet
        self._box_lost: str | None = None  # why the sandbox itself was rebuilt (its files are gone)
        self._outbox: Path | None = None  # host copies of the images cells returned, made as they were checked
        self.restarts = 0
        self._preload = ""

    # ---- what a subclass provides ---------------------------------------------------------------------
    @property
    def inside(self) -> str:
        """Where the kernel sees the work folder."""
        return INSIDE

    @property
    def workdir(self) -> Path | None:
        """The episode folder as the host reads and writes it while the sandbox runs: the sandbox's own
        memory-backed /episode, reached through its launcher's root (None when no sandbox runs)."""
        return Path(f"/proc/{self._root_pid}/root{INSIDE}") if self._root_pid else None

    def _start_box(self) -> None:
        """Build the sandbox with kernel.py's launcher as its first process; set _control and _root_pid.
        SandboxError (having cleaned up after itself) if it cannot."""
        raise NotImplementedError

    def _stop_box(self) -> None:
        """Kill everything in the sandbox and forget it (safe to call when none runs)."""
        raise NotImplementedError

    def _startup_log(self) -> str:
        """What the sandbox and the kernel said, for an error about a kernel that did not start."""
        raise NotImplementedError

    def _death_detail(self, code: int | None) -> str:
        """What a kernel's exit status means here (a limit it hit), appended to 'the kernel died (exit N)'."""
        return ""

    def _notes(self) -> list[str]:
        """Notes every result carries (the unisolated mode says so)."""
        return []

    # ---- the launcher ---------------------------------------------------------------------------------
    def _box_alive(self) -> bool:
        if self._control is None:
            return False
        if select.select([self._control], [], [], 0)[0]:
            try:
                peek = self._control.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                return True
            except OSError:
                return False
            return peek != b""  # end of file: the launcher, so the whole sandbox, is gone
        return True

    def _launcher_report(self, timeout: float) -> dict | None:
        """The launcher's next report ({"exit": code, "pid": pid} when a kernel ended), within `timeout`."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._reports:
            left = max(0.0, deadline - time.monotonic())
            if self._control is None or not select.select([self._control], [], [], left)[0]:
                return None
            try:
                chunk = self._control.recv(4096, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError:
                return None
            if not chunk or len(self._reports) > 1 << 16:
                return None
            self._reports += chunk
        line, _, self._reports = self._reports.partition(b"\n")
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        return msg if isinstance(msg, dict) else None

    def _open_kernel(self) -> None:
        """Ask the launcher for a fresh kernel (it kills whatever else runs in the sandbox) and wait until it
        is ready. SandboxError if it does not come up."""
        while self._launcher_report(0) is not None:  # exits of kernels already replaced
            pass
        self._connect_kernel(lambda req_r, out_w: socket.send_fds(self._control, [b"k"], [req_r, out_w]))

    def _connect_kernel(self, hand_over) -> None:
        """Make a kernel's two pipes, give their far ends to `hand_over(request_read_fd, answer_write_fd)`, which
        starts a kernel on them, and wait until it says it is ready. SandboxError if it does not."""
        req_r, req_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            hand_over(req_r, out_w)
        except OSError as err:
            os.close(req_w)
            os.close(out_r)
            raise SandboxError(f"the Python sandbox did not start: {err}") from None
        finally:
            os.close(req_r)
            os.close(out_w)
        self._pipe = KernelPipe(req_w, out_r, self._max_line())
        try:
            ready = self._pipe.read(timeout=self.start_seconds)
            ready = check_answer(ready, READY) if ready is not None else None
        except (EOFError, ProtocolError):
            ready = None
        if ready is None or ready["ready"] is not True:
            self._kill()
            raise SandboxError(f"the Python sandbox did not start: {self._startup_log() or 'no answer'}")
        self._kernel_pid = ready["pid"]

    def _kernel_log(self) -> str:
        """The end of what kernels wrote to their own stderr (outside cells), in the episode folder."""
        try:
            return (self.workdir / ".kernel.log").read_text(errors="replace")[-2000:].strip()
        except (OSError, TypeError):  # no sandbox (TypeError: workdir is None), or no log yet
            return ""

    def _max_line(self) -> int:
        """The longest line a kernel's answer can take: each text field is cut to output_bytes characters,
        and JSON writes a character in at most 12 bytes (an escaped surrogate pair)."""
        return 64 * 1024 + 4 * 12 * self.limits.output_bytes + self.limits.images * 4096

    def _kernel_exit(self, wait: float) -> int | None:
        """The exit status of the kernel that stopped answering, as the launcher reported it."""
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            msg = self._launcher_report(left)
            if msg is None:
                return None
            if msg.get("pid") == self._kernel_pid and isinstance(msg.get("exit"), int):
                return msg["exit"]
        return None

    # ---- shared -----------------------------------------------------------------------------------------
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self):
        try:
            self._spawn()
        except BaseException:
            self.close()  # a half-started sandbox leaves no process behind
            raise
        return self

    def close(self) -> None:
        self._kill()
        self._stop_box()
        if self._outbox is not None:
            shutil.rmtree(self._outbox, ignore_errors=True)
            self._outbox = None

    def _spawn_kernel(self) -> None:
        """A ready kernel: from the running sandbox's launcher when it still answers, else from a new sandbox
        (whose /episode starts empty: the old one's files went with it)."""
        if self._box_alive():
            try:
                self._open_kernel()
                return
            except SandboxError as err:
                self._box_lost = f"the sandbox stopped answering ({err})"
        elif self._control is not None:
            self._box_lost = "the sandbox itself ended"
        self._stop_box()
        self._start_box()
        self._open_kernel()

    def _kill(self) -> None:
        """Let go of the kernel; the launcher kills it (and all it started) when the next one is asked for,
        or the sandbox goes with it on close."""
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None

    def _death(self) -> str:
        code = self._kernel_exit(wait=2)
        why = f"the kernel died (exit {code})" if code is not None else "the kernel stopped answering"
        return why + self._death_detail(code)

    def _spawn(self) -> None:
        self._spawn_kernel()
        if self._preload:
            self._set(self._preload)

    def _restart(self, why: str, result: CellResult) -> CellResult:
        self._kill()
        self.restarts += 1
        result.notes.append(f"{why}; the kernel was restarted and its variables are lost")
        self._box_lost = None
        try:
            self._spawn()
        finally:
            if self._box_lost:
                result.notes.append(f"{self._box_lost}: it was rebuilt, and the files in {self.inside} are lost")
        return result

    def _exchange(self, req: dict, timeout: float, shape: dict) -> dict | None:
        """Send one request with a fresh id and return its checked answer (None past `timeout`). EOFError when
        the kernel is gone, ProtocolError when its pipe carried anything else."""
        req = {"id": secrets.token_hex(8), **req}
        res = self._pipe.request(req, timeout)
        return check_answer(res, shape, req["id"]) if res is not None else None

    def _set(self, code: str) -> None:
        try:
            res = self._exchange({"op": "set", "code": code}, 30.0, SET_ANSWER)
        except (EOFError, ProtocolError):
            res = None
        if res is None or not res["ok"]:
            raise SandboxError("preloading the kernel failed: " + ((res or {}).get("error") or "no answer").strip())

    def preload(self, code: str) -> None:
        """Code run in the namespace now and after every restart (task images as image_1, image_2, …)."""
        if self._pipe is None:
            raise SandboxError("the sandbox is not started")
        self._set(code)
        self._preload += code + "\n"

    def run(self, code: str, timeout: float | None = None) -> CellResult:
        """Run one cell. Crashes, timeouts and broken protocol are reported in the result; the kernel is
        restarted."""
        if self._pipe is None:
            raise SandboxError("the sandbox is not started")
        timeout = timeout or self.limits.cell_seconds
        result = CellResult(notes=self._notes())
        stray = self._pipe.stray()
        if stray:  # written after the last answer: an earlier cell wrote to the answer pipe
            self._restart(f"the kernel's answer pipe held {_shown(stray)}, which no request asked for (code in an "
                          f"earlier cell wrote to it)", result)
        req = {"op": "run", "code": code, "output_cap": self.limits.output_bytes, "image_limit": self.limits.images}
        try:
            res = self._exchange(req, timeout, RUN_ANSWER)
        except EOFError:
            result.error = self._death()
            return self._restart(result.error, result)
        except ProtocolError as err:
            result.error = (f"the kernel's answer pipe carried {err} instead of this cell's answer (code in a cell "
                            f"wrote to it), so this cell's result is lost")
            return self._restart(result.error, result)
        if res is None:
            result.error = f"the cell ran past its {timeout:g} s limit"
            return self._restart(result.error, result)
        if self._outbox is None and res["images"]:
            self._outbox = private_folder("toolpath-images-")
        return fill_result(result, res, self.limits, self.inside, self.workdir, self._outbox)

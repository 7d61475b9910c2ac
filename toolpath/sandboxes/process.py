"""A persistent Python kernel in a child process, isolated without Docker (bubblewrap or unshare + rlimits).

Inside: its own user, PID, network, IPC and UTS namespaces (no network at all, not even loopback to the
host's services); a file system made of the system directories and the Python installation, read-only, a
private /tmp, and one read-write folder per episode mounted at /episode; no environment variables from the
host (so no API keys); rlimits on CPU, memory, open files and file size; a pids cgroup (or RLIMIT_NPROC)
against fork bombs; a wall-clock timeout per cell. Closing the sandbox kills every process in it.

Isolation, in order of preference (`isolation="auto"` takes the first that works here):
  bwrap       bubblewrap builds the namespaces and the file system
  unshare     util-linux's unshare builds the same namespaces; a small shell script mounts the same read-only
              file system, chroots into it and drops to an unprivileged user (setpriv)
Where neither works, the sandbox refuses to start, unless the user asks by name for isolation="unisolated":
then the kernel is a plain child process with rlimits only, and every result says so.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .base import SandboxError, SandboxLimits

KERNEL = Path(__file__).with_name("kernel.py")
# Where the episode's folder appears inside the sandbox. Not /work: a checkout (and its .venv, which the
# kernel needs) may live under /work on the host, and a mount there would hide it.
INSIDE = "/episode"
ISOLATIONS = ("auto", "bwrap", "unshare", "unisolated")
NOBODY = 65534
# Host paths the kernel sees, read-only, at the same place: the system and the interpreter's own folders.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/alternatives", "/etc/ssl")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/mime.types")
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


def _python_dirs() -> list[str]:
    return sorted({os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)})


def unshare_works() -> str | None:
    """None when unshare can make the namespaces and mounts this sandbox needs, else the reason it cannot."""
    missing = [t for t in ("unshare", "setpriv", "chroot", "mount") if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian package util-linux / coreutils)"
    cmd = ["unshare", *_unshare_flags(), "--", "sh", "-c", "mount -t tmpfs tmpfs /mnt && mount -t proc proc /proc"]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unshare failed to run: {err}"
    return None if r.returncode == 0 else f"unshare cannot create namespaces here: {r.stderr.decode()[:200].strip()}"


def _unshare_flags() -> list[str]:
    # As root, the namespaces need no user namespace; as anyone else, a user namespace maps them to root in it.
    user = [] if os.getuid() == 0 else ["--user", "--map-root-user"]
    return [*user, "--net", "--pid", "--fork", "--mount", "--ipc", "--uts", "--kill-child", "--mount-proc"]


def _unshare_script(root: str, workdir: str, kernel: str, py: str, kernel_args: list[str]) -> str:
    """The shell script that runs as root inside the new namespaces and builds bwrap's file system by hand:
    a tmpfs root with the system and Python folders bound read-only, /episode read-write, a private /tmp,
    then chroot and exec the kernel as an unprivileged user with no capabilities and an empty environment."""
    import shlex

    q = shlex.quote
    lines = ["set -e", "mount --make-rprivate /", f"R={q(root)}", 'mount -t tmpfs -o mode=755 tmpfs "$R"']

    def ro_bind(path: str) -> None:
        if os.path.islink(path):  # merged /usr: /bin -> usr/bin stays a symlink inside
            lines.append(f'mkdir -p "$R"{q(os.path.dirname(path))} && ln -s {q(os.readlink(path))} "$R"{q(path)}')
            return
        kind = "mkdir -p" if os.path.isdir(path) else "touch"
        lines.append(f'mkdir -p "$R"{q(os.path.dirname(path))} && {kind} "$R"{q(path)}')
        lines.append(f'mount --rbind {q(path)} "$R"{q(path)} && mount -o remount,bind,ro "$R"{q(path)}')

    for d in SYSTEM_DIRS + SYSTEM_FILES:
        if os.path.lexists(d):
            ro_bind(d)
    for d in _python_dirs():
        ro_bind(d)
    lines += ['mkdir -p "$R/opt/toolpath" && touch "$R/opt/toolpath/kernel.py"',
              f'mount --bind {q(kernel)} "$R/opt/toolpath/kernel.py" && mount -o remount,bind,ro "$R/opt/toolpath/kernel.py"',
              f'mkdir -p "$R"{INSIDE} && mount --bind {q(workdir)} "$R"{INSIDE}',
              'mkdir -p "$R/tmp" "$R/proc" "$R/dev" && mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"',
              'mount -t proc -o nosuid,nodev,noexec proc "$R/proc"',
              'for d in null zero full random urandom tty; do touch "$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done',
              'mount -o remount,bind,ro "$R"']
    env = " ".join(f"{k}={q(v)}" for k, v in KERNEL_ENV.items())
    ids = f"--reuid {NOBODY} --regid {NOBODY} --clear-groups " if os.getuid() == 0 else ""
    kernel_cmd = "cd " + INSIDE + " && exec " + " ".join(map(q, [py, "-I", "-B", "/opt/toolpath/kernel.py", *kernel_args]))
    # No exec: this shell stays the namespace's init (pid 1, like bwrap's), so the kernel's parent is not a
    # host process; setsid puts the kernel in a session of its own, so kill(0) reaches nothing but itself.
    lines.append(f'chroot "$R" setpriv {ids}--inh-caps=-all --bounding-set=-all --no-new-privs '
                 f'env -i {env} setsid sh -c {q(kernel_cmd)}')
    return "\n".join(lines)


def bwrap_works() -> str | None:
    """None when bubblewrap can make a sandbox here, else the reason it cannot."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    try:
        r = subprocess.run([exe, "--ro-bind", "/", "/", "--unshare-all", "--", "true"], capture_output=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bwrap failed to run: {err}"
    return None if r.returncode == 0 else f"bwrap cannot create namespaces here: {r.stderr.decode()[:200].strip()}"


class _PidsCgroup:
    """A cgroup-v1/v2 pids limit for the sandbox's processes, where this process may create one."""

    def __init__(self, limit: int):
        self.path = None
        for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
            if (root / "pids.max").exists() or (root / "cgroup.controllers").exists() and "pids" in (
                    root / "cgroup.controllers").read_text():
                try:
                    p = root / f"toolpath-{uuid.uuid4().hex[:10]}"
                    p.mkdir()
                    (p / "pids.max").write_text(str(limit))
                    self.path = p
                    return
                except OSError:
                    continue

    def add(self, pid: int) -> bool:
        if self.path is None:
            return False
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
            return True
        except OSError:
            return False

    def remove(self) -> None:
        if self.path is not None:
            try:
                self.path.rmdir()
            except OSError:
                pass


class ProcessSandbox:
    """A stateful Python kernel for one episode. Use as a context manager."""

    def __init__(self, limits: SandboxLimits | None = None, isolation: str = "auto", workdir: str | Path | None = None):
        if isolation not in ISOLATIONS:
            raise SandboxError(f"unknown isolation {isolation!r}; expected one of {', '.join(ISOLATIONS)}")
        self.limits = limits or SandboxLimits()
        self.requested = isolation
        self.isolation: str | None = None
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="toolpath-episode-"))
        self.proc: subprocess.Popen | None = None
        self._out: int | None = None
        self._buf = b""
        self._cgroup: _PidsCgroup | None = None
        self.restarts = 0
        self._preload = ""
        self._root: str | None = None  # the empty mount point the unshare mode builds its file system on

    # ---- lifecycle ----------------------------------------------------------------------------------
    def __enter__(self) -> "ProcessSandbox":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "ProcessSandbox":
        if self.isolation is None:
            self.isolation = self._choose_isolation()
        self.workdir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.workdir, 0o777)  # the kernel runs as an unprivileged user inside
        self._spawn()
        return self

    def close(self) -> None:
        self._kill()
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self._root is not None:  # its mounts lived in the sandbox's mount namespace and went with it
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _choose_isolation(self) -> str:
        if self.requested == "unisolated":
            return "unisolated"
        checks = {"bwrap": bwrap_works, "unshare": unshare_works}
        wanted = list(checks) if self.requested == "auto" else [self.requested]
        reasons = []
        for name in wanted:
            reason = checks[name]()
            if reason is None:
                return name
            reasons.append(f"{name}: {reason}")
        raise SandboxError(f"no isolation available for the Python sandbox ({'; '.join(reasons)}). To run code "
                           f"without isolation anyway, ask for it by name: sandbox: {{kind: process, options: "
                           f"{{isolation: unisolated}}}}")

    def _command(self, out_fd: int) -> list[str]:
        py = sys.executable  # the venv's own interpreter path, so its site-packages (numpy, PIL) are found
        kernel_args = [str(out_fd), f"{INSIDE}/.images"]
        if self.isolation == "unisolated":
            return [py, "-I", str(KERNEL), str(out_fd), str(self.workdir / ".images")]
        if self.isolation == "unshare":
            self._root = self._root or tempfile.mkdtemp(prefix="toolpath-root-")
            script = _unshare_script(self._root, str(self.workdir), str(KERNEL), py, kernel_args)
            return ["unshare", *_unshare_flags(), "--", "sh", "-c", script]
        cmd = ["bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--uid", str(NOBODY), "--gid",
               str(NOBODY), "--cap-drop", "ALL", "--clearenv", "--hostname", "sandbox"]
        for k, v in KERNEL_ENV.items():
            cmd += ["--setenv", k, v]
        # /tmp first: the interpreter or its venv may live under /tmp on the host (a CI clone), and a
        # tmpfs mounted after their binds would hide them.
        cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for d in SYSTEM_DIRS + SYSTEM_FILES:
            if os.path.exists(d):
                cmd += ["--ro-bind", d, d]
        # The interpreter and its packages, at the paths they were built for, read-only; nothing else of $HOME.
        for d in _python_dirs():
            cmd += ["--ro-bind", d, d]
        cmd += ["--ro-bind", str(KERNEL), "/opt/toolpath/kernel.py", "--bind", str(self.workdir), INSIDE,
                "--chdir", INSIDE,
                "--remount-ro", "/", "--",
                py, "-I", "-B", "/opt/toolpath/kernel.py", *kernel_args]
        return cmd

    def _limits(self) -> None:  # runs in the child, before exec
        lim = self.limits
        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_seconds, lim.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (lim.memory_mb * mb, lim.memory_mb * mb))
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim.open_files, lim.open_files))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_size_mb * mb, lim.file_size_mb * mb))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if os.getuid() != 0:  # root ignores RLIMIT_NPROC; the pids cgroup covers that case
            resource.setrlimit(resource.RLIMIT_NPROC, (lim.processes, lim.processes))

    def _spawn(self) -> None:
        r, w = os.pipe()
        env = {"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "HOME": str(self.workdir)} \
            if self.isolation == "unisolated" else {}
        # The kernel's own stderr (outside cells) goes to a log file, not a pipe nobody drains: a full pipe
        # would block the kernel. It is read when the kernel fails to start.
        log = open(self.workdir / ".kernel.log", "ab")
        try:
            self.proc = subprocess.Popen(self._command(w), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=log, pass_fds=(w,), preexec_fn=self._limits,
                                         start_new_session=True, env=env, cwd=self.workdir)
        except OSError as err:
            os.close(r)
            os.close(w)
            raise SandboxError(f"cannot start the Python sandbox: {err}") from err
        finally:
            log.close()
        os.close(w)
        self._out, self._buf = r, b""
        if self.isolation in ("bwrap", "unshare"):
            self._cgroup = self._cgroup or _PidsCgroup(self.limits.processes)
            self._cgroup.add(self.proc.pid)
        try:
            ready = self._read(timeout=30.0)
        except EOFError:
            ready = None
        if ready is None or not ready.get("ready"):
            self._kill()
            err = (self.workdir / ".kernel.log").read_text(errors="replace")[-2000:]
            raise SandboxError(f"the Python sandbox did not start: {err.strip() or 'no answer'}")
        if self._preload:
            self._set(self._preload)

    def _kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the whole session: bwrap, the kernel, its children
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc = None
        if self._out is not None:
            os.close(self._out)
            self._out = None

    def _restart(self, why: str, result: CellResult) -> CellResult:
        self._kill()
        self.restarts += 1
        result.notes.append(f"{why}; the kernel was restarted and its variables are lost")
        self._spawn()
        return result

    # ---- protocol -----------------------------------------------------------------------------------
    def _read(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._out], [], [], left)
            if not ready:
                return None
            chunk = os.read(self._out, 1 << 16)
            if not chunk:
                raise EOFError
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def _request(self, req: dict, timeout: float) -> dict | None:
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise EOFError from None
        return self._read(timeout)

    def _image_paths(self, reported: list, result: CellResult) -> list[Path]:
        """Host paths of the images the kernel reports. The kernel runs user code, so its answer is untrusted:
        only regular files inside this episode's work folder are taken, never a symlink out of it."""
        inside = str(self.workdir) + "/" if self.isolation == "unisolated" else INSIDE + "/"
        root = self.workdir.resolve()
        out = []
        for p in reported[: self.limits.images]:
            host = self.workdir / p[len(inside):] if isinstance(p, str) and p.startswith(inside) else None
            if host is None or host.is_symlink() or not host.is_file() or root not in host.resolve().parents:
                result.notes.append(f"image {str(p)[:80]!r} was refused: not a file in the episode's work folder")
                continue
            out.append(host)
        return out

    def _set(self, code: str) -> None:
        try:
            res = self._request({"op": "set", "code": code}, timeout=30.0)
        except EOFError:
            res = None
        if res is None or not res.get("ok"):
            raise SandboxError("preloading the kernel failed: " + ((res or {}).get("error") or "no answer").strip())

    def preload(self, code: str) -> None:
        """Code run in the namespace now and after every restart (task images as image_1, image_2, …)."""
        self._set(code)
        self._preload += code + "\n"

    def run(self, code: str, timeout: float | None = None) -> CellResult:
        """Run one cell. Crashes and timeouts are reported in the result; the kernel is restarted."""
        if self.proc is None:
            raise SandboxError("the sandbox is not started")
        timeout = timeout or self.limits.cell_seconds
        result = CellResult()
        if self.isolation == "unisolated":
            result.notes.append("UNISOLATED: this code ran without a sandbox (isolation=unisolated)")
        req = {"code": code, "output_cap": self.limits.output_bytes, "image_limit": self.limits.images}
        try:
            res = self._request(req, timeout)
        except EOFError:
            try:
                code_ = self.proc.wait(timeout=2)  # the pipe closes a moment before bwrap has exited
            except subprocess.TimeoutExpired:
                code_ = None
            why = f"the kernel died (exit {code_})" if code_ is not None else "the kernel stopped answering"
            if code_ in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU):
                why += f": it used up its {self.limits.cpu_seconds} s of CPU or was killed"
            result.error = why
            return self._restart(why, result)
        if res is None:
            result.error = f"the cell ran past its {timeout:g} s limit"
            return self._restart(result.error, result)
        result.stdout, result.stderr = res["stdout"], res["stderr"]
        result.value, result.error = res.get("value"), res.get("error")
        for stream in ("stdout", "stderr"):
            if res.get(f"{stream}_truncated"):
                result.notes.append(f"{stream} was cut to {self.limits.output_bytes} of {res[f'{stream}_bytes']} bytes")
        result.images = self._image_paths(res.get("images") or [], result)
        if res.get("images_dropped"):
            result.notes.append(f"{res['images_dropped']} more image(s) were not returned (limit {self.limits.images})")
        return result

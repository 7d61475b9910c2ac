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
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from .base import SandboxError, SandboxLimits
from .kernel_client import INSIDE, KERNEL, KERNEL_ENV, NOBODY, CellResult, KernelPipe, KernelSandbox

__all__ = ["ProcessSandbox", "CellResult", "bwrap_works", "unshare_works", "ISOLATIONS"]
ISOLATIONS = ("auto", "bwrap", "unshare", "unisolated")
# Host paths the kernel sees, read-only, at the same place: the system and the interpreter's own folders.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/alternatives", "/etc/ssl")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/mime.types")


def _python_dirs() -> list[str]:
    """The interpreter's folders, and toolpath's own package when it lives outside them (an editable install),
    so code in the sandbox can import the spatial API and the like: read-only, nothing else of the checkout."""
    dirs = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    package = os.path.realpath(Path(__file__).resolve().parents[1])
    if not any(package == d or package.startswith(d + os.sep) for d in dirs):
        dirs.add(package)
    return sorted(dirs)


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
    lines = ["set -e", "mount --make-rprivate /", f"R={q(root)}", 'mount -t tmpfs -o mode=755 tmpfs "$R"',
             # /tmp first, as with bwrap: the interpreter or its venv may live under /tmp on the host (a CI
             # clone), and a tmpfs mounted after their binds would hide them.
             'mkdir -p "$R/tmp" && mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"']

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
              'mkdir -p "$R/proc" "$R/dev"',
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


class ProcessSandbox(KernelSandbox):
    """A stateful Python kernel for one episode, in a child process. Use as a context manager."""

    OPTIONS = ("isolation",)  # what a task spec's sandbox.options may set besides the limits

    def __init__(self, limits: SandboxLimits | None = None, isolation: str = "auto", workdir: str | Path | None = None):
        if isolation not in ISOLATIONS:
            raise SandboxError(f"unknown isolation {isolation!r}; expected one of {', '.join(ISOLATIONS)}")
        super().__init__()
        self.limits = limits or SandboxLimits()
        self.requested = isolation
        self.isolation: str | None = None
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="toolpath-episode-"))
        self.proc: subprocess.Popen | None = None
        self._cgroup: _PidsCgroup | None = None
        self._root: str | None = None  # the empty mount point the unshare mode builds its file system on

    # ---- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> "ProcessSandbox":
        try:
            if self.isolation is None:
                self.isolation = self._choose_isolation()
            self.workdir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.workdir, 0o777)  # the kernel runs as an unprivileged user inside
            self._spawn()
        except BaseException:
            self.close()  # a half-started sandbox leaves no process and no folder behind
            raise
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

    @property
    def inside(self) -> str:
        return str(self.workdir) if self.isolation == "unisolated" else INSIDE

    def _notes(self) -> list[str]:
        if self.isolation == "unisolated":
            return ["UNISOLATED: this code ran without a sandbox (isolation=unisolated)"]
        return []

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

    def _spawn_kernel(self) -> None:
        out_r, out_w = os.pipe()
        in_r, in_w = os.pipe()
        env = {"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "HOME": str(self.workdir)} \
            if self.isolation == "unisolated" else {}
        # The kernel's own stderr (outside cells) goes to a log file, not a pipe nobody drains: a full pipe
        # would block the kernel. It is read when the kernel fails to start.
        log = open(self.workdir / ".kernel.log", "ab")
        try:
            self.proc = subprocess.Popen(self._command(out_w), stdin=in_r, stdout=subprocess.DEVNULL,
                                         stderr=log, pass_fds=(out_w,), preexec_fn=self._limits,
                                         start_new_session=True, env=env, cwd=self.workdir)
        except OSError as err:
            for fd in (out_r, out_w, in_r, in_w):
                os.close(fd)
            raise SandboxError(f"cannot start the Python sandbox: {err}") from err
        finally:
            log.close()
        os.close(out_w)
        os.close(in_r)
        self._pipe = KernelPipe(in_w, out_r)
        if self.isolation in ("bwrap", "unshare"):
            self._cgroup = self._cgroup or _PidsCgroup(self.limits.processes)
            self._cgroup.add(self.proc.pid)
        try:
            ready = self._pipe.read(timeout=30.0)
        except EOFError:
            ready = None
        if ready is None or not ready.get("ready"):
            self._kill()
            err = (self.workdir / ".kernel.log").read_text(errors="replace")[-2000:]
            raise SandboxError(f"the Python sandbox did not start: {err.strip() or 'no answer'}")

    def _kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the whole session: bwrap, the kernel, its children
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=2)  # the pipe closes a moment before bwrap has exited
        except subprocess.TimeoutExpired:
            code = None
        why = f"the kernel died (exit {code})" if code is not None else "the kernel stopped answering"
        if code in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU):
            why += f": it used up its {self.limits.cpu_seconds} s of CPU or was killed"
        return why

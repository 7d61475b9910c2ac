"""A persistent Python kernel in a child process, isolated without Docker (bubblewrap or unshare + rlimits).

Inside: its own user, PID, network, IPC and UTS namespaces (no network at all, not even loopback to the
host's services); a file system made of the system directories and the Python installation, read-only; three
memory-backed folders, each bounded by `limits.disk_mb` and mounted nosuid and nodev: /tmp, /dev/shm and the
episode's folder at /episode; no environment variables from the host (so no API keys); rlimits on CPU, memory,
open files and file size; a pids cgroup (or RLIMIT_NPROC) against fork bombs; a wall-clock timeout per cell;
a seccomp filter (seccomp.py) refusing the system calls that attacks on the kernel start from (new namespaces,
io_uring, bpf, keyrings, ptrace, mounts). Closing the sandbox kills every process in it.

Why the episode folder is a tmpfs of the sandbox's own, not a host folder. A host folder the sandbox writes to
cannot be bounded in size, keeps whatever modes the sandbox gave its files (a setuid bit included) on a host file
system, and outlives a host killed with SIGKILL. A tmpfs mounted in the sandbox's own mount namespace is bounded
(disk_mb), nosuid (no setuid bit set inside means anything, wherever the file is opened from), reachable only by
root or the same user (through /proc/<pid>/root, which needs ptrace rights over the sandbox), and gone with the
sandbox however the host ends: nothing is left to clean up at the next start. The host reads and writes it while
the sandbox lives at `workdir` (/proc/<launcher>/root/episode): the task's inputs go in there, figures come out.

So that a kernel restart (a crash, a timeout) keeps that folder, the sandbox's first process is kernel.py's
launcher, not the kernel: it forks a fresh kernel on request and kills everything else in the sandbox first.

And the sandbox never runs as host root. bubblewrap, run by root, maps the sandbox's uid to host root; instead
it builds the file system as root (so a Python installed under /root can still be bound) in a user namespace
that we map ourselves (root to root, 65534 to 65534), and the launcher becomes uid 65534 with no capabilities
before any user code runs. unshare's script drops to uid 65534 with setpriv. As any other user, both map the
sandbox to that user through an unprivileged user namespace. Cost: a launcher and a fork per kernel instead of
one exec; the start time stays where it was (benchmarks/sandbox.py), and a restart is faster.

Isolation, in order of preference (`isolation="auto"` takes the first that works):
  bwrap       bubblewrap (0.8 or later, for bounded tmpfs) builds the namespaces and the file system
  unshare     util-linux's unshare builds the same namespaces; a small shell script mounts the same read-only
              file system, chroots into it and drops to an unprivileged user (setpriv)
Where neither works, the sandbox refuses to start, unless the user asks by name for isolation="unisolated":
then the kernel is a plain child process with rlimits only, in a private host folder (mode 0700, removed on
close, or at a later start if its host was killed), and every result says so.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Literal

from pydantic import Field

from .base import SandboxError, SandboxLimits, SandboxOptions
from .kernel_client import INSIDE, KERNEL, KERNEL_ENV, LAUNCH_ARGS, NOBODY, CellResult, KernelSandbox
from .leftovers import private_folder
from .seccomp import SeccompUnavailable, program

__all__ = ["ProcessSandbox", "CellResult", "bwrap_works", "unshare_works", "ISOLATIONS"]
ISOLATIONS = ("auto", "bwrap", "unshare", "unisolated")
# Host paths the kernel sees, read-only, at the same place: the system and the interpreter's own folders.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/alternatives", "/etc/ssl")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/mime.types")
KERNEL_INSIDE = "/opt/toolpath/kernel.py"
MB = 1024 * 1024
# What bubblewrap's launcher keeps, as root, until it has become uid 65534: enough to give itself the episode
# folder and change its ids, nothing else; leaving uid 0 clears them, before any user code runs.
ROOT_SETUP_CAPS = ("CAP_CHOWN", "CAP_SETUID", "CAP_SETGID")
UNISOLATED_PREFIX = "toolpath-episode-"


def _python_dirs() -> list[str]:
    """The interpreter's folders, and toolpath's own package when it lives outside them (an editable install),
    so code in the sandbox can import the spatial API and the like: read-only, nothing else of the checkout."""
    dirs = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    package = os.path.realpath(Path(__file__).resolve().parents[1])
    if not any(package == d or package.startswith(d + os.sep) for d in dirs):
        dirs.add(package)
    return sorted(dirs)


def _launch_command(control_fd: int, drop_root: bool, seccomp_fd: int | None = None) -> list[str]:
    """The sandbox's first process: kernel.py's launcher, talking to the host over `control_fd`. When toolpath
    lives outside the interpreter's folders (a checkout on PYTHONPATH), the kernel imports that same package.
    With `seccomp_fd` the launcher installs that filter itself (unshare's setpriv cannot)."""
    package = os.path.realpath(Path(__file__).resolve().parents[1])
    outside = package in _python_dirs()
    return [sys.executable, "-I", "-B", KERNEL_INSIDE, "launch", "--control", str(control_fd), *LAUNCH_ARGS,
            *(["--drop-to", str(NOBODY)] if drop_root else []),
            *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
            *(["--import-root", os.path.dirname(package)] if outside else [])]


# ---- unshare ------------------------------------------------------------------------------------------------
_WORKS: set[str] = set()  # isolations that worked once in this process: no need to try them at every start


def unshare_works() -> str | None:
    """None when unshare can make the namespaces and mounts this sandbox needs, else the reason it cannot."""
    if "unshare" in _WORKS:
        return None
    missing = [t for t in ("unshare", "setpriv", "chroot", "mount") if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian package util-linux / coreutils)"
    if not os.path.isdir("/dev/shm"):
        return "/dev/shm is missing (the sandbox builds its root on it)"
    cmd = ["unshare", *_unshare_flags(), "--", "sh", "-c", "mount -t tmpfs tmpfs /dev/shm && mount -t proc proc /proc"]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unshare failed to run: {err}"
    if r.returncode != 0:
        return f"unshare cannot create namespaces here: {r.stderr.decode()[:200].strip()}"
    _WORKS.add("unshare")
    return None


def _unshare_flags() -> list[str]:
    # As root, the namespaces need no user namespace; as anyone else, a user namespace maps them to root in it.
    user = [] if os.getuid() == 0 else ["--user", "--map-root-user"]
    return [*user, "--net", "--pid", "--fork", "--mount", "--ipc", "--uts", "--kill-child", "--mount-proc"]


def _unshare_script(kernel: str, control_fd: int, disk_mb: int, seccomp_fd: int | None) -> str:
    """The shell script that runs as root inside the new namespaces and builds bwrap's file system by hand:
    a tmpfs root with the system and Python folders bound read-only, bounded tmpfs folders for /tmp, /dev/shm
    and /episode, then chroot and exec the launcher as an unprivileged user with no capabilities and an empty
    environment. It stays pid 1 of the namespace throughout (exec, never a child)."""
    import shlex

    q = shlex.quote
    owner = NOBODY if os.getuid() == 0 else 0  # who the kernel is inside: 65534, or root of a user namespace
    bounded = f"nosuid,nodev,size={disk_mb}m"
    # The root is built on /dev/shm, mounted over in this mount namespace only: a folder that exists everywhere
    # and holds nothing we bind, so no host folder is made for it (nor left behind).
    lines = ["set -e", "mount --make-rprivate /", "R=/dev/shm", 'mount -t tmpfs -o mode=755 tmpfs "$R"',
             # /tmp first, as with bwrap: the interpreter or its venv may live under /tmp on the host (a CI
             # clone), and a tmpfs mounted after their binds would hide them.
             f'mkdir -p "$R/tmp" && mount -t tmpfs -o mode=1777,{bounded} tmpfs "$R/tmp"']

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
    lines += [f'mkdir -p "$R/opt/toolpath" && touch "$R{KERNEL_INSIDE}"',
              f'mount --bind {q(kernel)} "$R{KERNEL_INSIDE}" && mount -o remount,bind,ro "$R{KERNEL_INSIDE}"',
              f'mkdir -p "$R"{INSIDE} && mount -t tmpfs -o mode=0700,uid={owner},gid={owner},{bounded} tmpfs '
              f'"$R"{INSIDE}',
              'mkdir -p "$R/proc" "$R/dev/shm"',
              'mount -t proc -o nosuid,nodev,noexec proc "$R/proc"',
              'for d in null zero full random urandom tty; do '
              'touch "$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done',
              f'mount -t tmpfs -o mode=1777,{bounded} tmpfs "$R/dev/shm"',
              # System V shared memory of this IPC namespace: no more than /dev/shm holds, and removed once no
              # process has it attached (it would otherwise outlive the kernel that made it).
              f'echo {disk_mb * 256} > "$R/proc/sys/kernel/shmall"',
              f'echo {disk_mb * MB} > "$R/proc/sys/kernel/shmmax"',
              'echo 1 > "$R/proc/sys/kernel/shm_rmid_forced"',
              'mount -o remount,bind,ro "$R"']
    env = " ".join(f"{k}={q(v)}" for k, v in KERNEL_ENV.items())
    ids = f"--reuid {NOBODY} --regid {NOBODY} --clear-groups " if os.getuid() == 0 else ""
    launcher = "cd " + INSIDE + " && exec " + " ".join(map(q, _launch_command(control_fd, False, seccomp_fd)))
    lines.append(f'exec chroot "$R" setpriv {ids}--inh-caps=-all --bounding-set=-all --no-new-privs '
                 f'env -i {env} sh -c {q(launcher)}')
    return "\n".join(lines)


# ---- bubblewrap ---------------------------------------------------------------------------------------------
_BWRAP_HELP: dict[str, str] = {}


def bwrap_works() -> str | None:
    """None when bubblewrap can make a sandbox here, else the reason it cannot."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    if exe in _WORKS:
        return None
    try:
        if exe not in _BWRAP_HELP:
            _BWRAP_HELP[exe] = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10).stdout
        r = subprocess.run([exe, "--ro-bind", "/", "/", "--unshare-all", "--", "true"], capture_output=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bwrap failed to run: {err}"
    if r.returncode != 0:
        return f"bwrap cannot create namespaces here: {r.stderr.decode()[:200].strip()}"
    if "--size" not in _BWRAP_HELP[exe]:
        return "this bubblewrap cannot bound a tmpfs's size (--size): 0.8 or later is needed"
    _WORKS.add(exe)
    return None


def _bwrap_command(limits: SandboxLimits, control_fd: int, info_fd: int, block_fd: int | None,
                   seccomp_fd: int | None) -> list[str]:
    """bwrap's arguments. As root (`block_fd` given), bwrap waits on that fd until the host has written the
    user namespace's id maps (see _map_ids), and the launcher drops to uid 65534 itself. bwrap installs the
    seccomp filter read from `seccomp_fd` last, just before it starts the launcher."""
    as_root = block_fd is not None
    cmd = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
           "--unshare-cgroup-try", "--die-with-parent", "--as-pid-1", "--new-session", "--info-fd", str(info_fd),
           "--cap-drop", "ALL", "--clearenv", "--hostname", "sandbox"]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    if as_root:
        cmd += ["--userns-block-fd", str(block_fd), "--uid", "0", "--gid", "0"]
        for cap in ROOT_SETUP_CAPS:
            cmd += ["--cap-add", cap]
    else:
        cmd += ["--uid", str(NOBODY), "--gid", str(NOBODY)]
    for k, v in KERNEL_ENV.items():
        cmd += ["--setenv", k, v]
    size = str(limits.disk_mb * MB)
    # /tmp first: the interpreter or its venv may live under /tmp on the host (a CI clone), and a tmpfs mounted
    # after their binds would hide them. bwrap mounts every tmpfs nosuid and nodev.
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
            "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
    # The system, and the interpreter and its packages at the paths they were built for, read-only; nothing else
    # of $HOME. The folders above them are made world-readable first: bwrap would make them 0700 and root's,
    # which the launcher, once uid 65534, could not walk through.
    binds = [(d, d) for d in SYSTEM_DIRS + SYSTEM_FILES if os.path.exists(d)]
    binds += [(d, d) for d in _python_dirs()] + [(str(KERNEL), KERNEL_INSIDE)]
    for parent in sorted({os.path.dirname(dest) for _, dest in binds} - {"/"}):
        cmd += ["--perms", "0755", "--dir", parent]
    for source, dest in binds:
        cmd += ["--ro-bind", source, dest]
    cmd += ["--perms", "0700", "--size", size, "--tmpfs", INSIDE,
            "--chdir", INSIDE, "--remount-ro", "/", "--", *_launch_command(control_fd, drop_root=as_root)]
    return cmd


def _read_info(fd: int, timeout: float) -> dict | None:
    """bwrap's --info-fd JSON (it closes the fd after writing), or None if it ended or stayed silent."""
    data, deadline = b"", time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    try:
        info = json.loads(data)
    except ValueError:
        return None
    return info if isinstance(info, dict) and isinstance(info.get("child-pid"), int) else None


def _map_ids(pid: int) -> None:
    """The id maps of a user namespace bwrap made as root: root to root (bwrap's setup reads host files as
    root) and 65534 to 65534 (what the launcher becomes). Written by us: bwrap itself would map the sandbox's
    uid to host root."""
    for name in ("uid_map", "gid_map"):
        fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY)
        try:
            os.write(fd, f"0 0 1\n{NOBODY} {NOBODY} 1\n".encode())  # one write: the kernel takes only one
        finally:
            os.close(fd)


def _first_child(pid: int, timeout: float) -> int | None:
    """The first child of `pid` (unshare's forked namespace init), once it exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return None
        if children:
            return int(children[0])
        time.sleep(0.002)
    return None


def _pidfd(pid: int) -> int | None:
    """A pidfd on `pid`, to signal and wait for a process that is not our child without racing pid reuse."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # before Linux 5.3; the launcher still ends when its control socket closes
        return None


def _kill_and_wait(pidfd: int, timeout: float = 5.0) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [], timeout)  # readable once the process has exited
    except OSError:  # gone already
        pass
    finally:
        os.close(pidfd)


class _PidsCgroup:
    """A cgroup-v1/v2 pids limit for the sandbox's processes, where this process may create one (as root)."""

    def __init__(self, limit: int):
        self.path = None
        for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
            if not self._has_pids(root):
                continue
            self._remove_stale(root)
            try:
                p = root / f"toolpath-{uuid.uuid4().hex[:10]}"
                p.mkdir()
                (p / "pids.max").write_text(str(limit))
                self.path = p
                return
            except OSError:
                continue

    @staticmethod
    def _has_pids(root: Path) -> bool:
        if root.name == "pids":  # cgroup v1: the pids hierarchy's root has no pids.max, its children do
            return (root / "cgroup.procs").exists()
        controllers = root / "cgroup.controllers"  # cgroup v2
        try:
            return "pids" in controllers.read_text().split()
        except OSError:
            return False

    @staticmethod
    def _remove_stale(root: Path) -> None:
        """Remove the empty cgroups of sandboxes whose host was killed (a cgroup in use cannot be removed; one
        made a moment ago may not have its process yet)."""
        for old in root.glob("toolpath-*"):
            try:
                if time.time() - old.stat().st_mtime > 60:
                    old.rmdir()
            except OSError:
                pass

    def procs_fd(self) -> int | None:
        """An fd on cgroup.procs, for a child to write itself into before it execs (so all it starts is in)."""
        if self.path is None:
            return None
        try:
            return os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return None

    def remove(self) -> None:
        if self.path is not None:
            try:
                self.path.rmdir()
            except OSError:
                pass


class ProcessOptions(SandboxOptions):
    isolation: Literal[ISOLATIONS] = Field("auto", description="bwrap, unshare, unisolated (only when named) or "
                                                               "auto (the first of bwrap and unshare that works)")


class ProcessSandbox(KernelSandbox):
    """A stateful Python kernel for one episode, in a child process. Use as a context manager."""

    Options = ProcessOptions  # what a task spec's sandbox.options may set: the limits and the isolation

    def __init__(self, limits: SandboxLimits | None = None, isolation: str = "auto"):
        if isolation not in ISOLATIONS:
            raise SandboxError(f"sandbox.options.isolation: unknown isolation {isolation!r}; expected one of "
                               f"{', '.join(ISOLATIONS)}")
        super().__init__()
        self.limits = limits or SandboxLimits()
        self.requested = isolation
        self.isolation: str | None = None
        self.proc: subprocess.Popen | None = None  # bwrap or unshare; the kernel itself when unisolated
        self._cgroup: _PidsCgroup | None = None
        self._log = None  # what bwrap or unshare said before the launcher took over (an unlinked file)
        self._folder: Path | None = None  # the unisolated kernel's host folder
        self._launcher: int | None = None  # a pidfd on the launcher, which is bwrap's or unshare's child
        self._unfiltered: str | None = None  # why this sandbox runs without a seccomp filter

    # ---- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> ProcessSandbox:
        try:
            if self.isolation is None:
                self.isolation = self._choose_isolation()
        except BaseException:
            self.close()
            raise
        return super().start()

    def close(self) -> None:
        super().close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    @property
    def inside(self) -> str:
        return str(self._folder) if self.isolation == "unisolated" else INSIDE

    @property
    def workdir(self) -> Path | None:
        return self._folder if self.isolation == "unisolated" else super().workdir

    def _notes(self) -> list[str]:
        if self.isolation == "unisolated":
            return ["UNISOLATED: this code ran without a sandbox (isolation=unisolated)"]
        if self._unfiltered is not None:
            return [f"NO SECCOMP FILTER: {self._unfiltered}"]
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

    def _limits(self, cgroup_fd: int | None = None) -> None:  # runs in the child, before exec
        lim = self.limits
        if cgroup_fd is not None:
            try:
                os.write(cgroup_fd, b"0")  # this process, and so everything it starts, counts against pids.max
            except OSError:  # the cgroup went away: RLIMIT_NPROC (not as root) or the cell timeout remain
                pass
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_seconds, lim.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (lim.memory_mb * MB, lim.memory_mb * MB))
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim.open_files, lim.open_files))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_size_mb * MB, lim.file_size_mb * MB))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if os.getuid() != 0:  # root ignores RLIMIT_NPROC; the pids cgroup covers that case
            resource.setrlimit(resource.RLIMIT_NPROC, (lim.processes, lim.processes))

    # ---- the isolated sandbox: bwrap or unshare, with kernel.py's launcher first ---------------------------
    def _start_box(self) -> None:
        if self.isolation == "unisolated":
            return
        ctl, ctl_box = socket.socketpair()
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe() if self.isolation == "bwrap" and os.getuid() == 0 else (None, None)
        seccomp = self._seccomp_file()
        seccomp_fd = seccomp.fileno() if seccomp is not None else None
        if self.isolation == "bwrap":
            cmd = _bwrap_command(self.limits, ctl_box.fileno(), info_w, block_r, seccomp_fd)
        else:
            cmd = ["unshare", *_unshare_flags(), "--", "sh", "-c",
                   _unshare_script(str(KERNEL), ctl_box.fileno(), self.limits.disk_mb, seccomp_fd)]
        self._cgroup = _PidsCgroup(self.limits.processes)
        self._log = tempfile.TemporaryFile()
        cgroup_fd = self._cgroup.procs_fd()
        pass_fds = [ctl_box.fileno(), info_w] + [fd for fd in (block_r, seccomp_fd) if fd is not None]
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
                                         pass_fds=pass_fds, preexec_fn=lambda: self._limits(cgroup_fd),
                                         start_new_session=True, env={})
        except OSError as err:
            raise SandboxError(f"the Python sandbox did not start: {err}") from err
        finally:
            for fd in [info_w, block_r, cgroup_fd]:
                if fd is not None:
                    os.close(fd)
            ctl_box.close()
            if seccomp is not None:
                seccomp.close()
            self._control = ctl
        try:
            self._root_pid = self._find_launcher(info_r, block_w)
        finally:
            for fd in (info_r, block_w):
                if fd is not None:
                    os.close(fd)
        if self._root_pid is None:
            raise SandboxError(f"the Python sandbox did not start: {self._startup_log() or 'no answer'}")
        self._launcher = _pidfd(self._root_pid)

    def _seccomp_file(self):
        """An unlinked file holding the seccomp program, read by bwrap or the launcher; None (and the reason
        kept for every result's notes) where none can be built here."""
        try:
            bpf = program()
        except SeccompUnavailable as why:
            self._unfiltered = str(why)
            return None
        f = tempfile.TemporaryFile()
        f.write(bpf)
        f.flush()
        f.seek(0)
        return f

    def _find_launcher(self, info_r: int, block_w: int | None) -> int | None:
        """The launcher's host pid (bwrap says it on --info-fd; unshare's is its first child); as root with
        bwrap, map the namespace's ids first and let bwrap go on."""
        if self.isolation == "unshare":
            return _first_child(self.proc.pid, timeout=10)
        info = _read_info(info_r, timeout=10)
        if info is None:
            return None
        if block_w is not None:
            try:
                _map_ids(info["child-pid"])
            except OSError as err:
                raise SandboxError(f"the Python sandbox did not start: cannot map its user ids: {err}") from None
            os.write(block_w, b"1")
        return info["child-pid"]

    def _stop_box(self) -> None:
        if self.isolation == "unisolated":
            return self._kill()
        if self._launcher is not None:  # first, so that close() returns with /episode gone
            _kill_and_wait(self._launcher)
            self._launcher = None
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # bwrap or unshare; the launcher dies with its parent
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None
        if self._control is not None:
            self._control.close()  # a launcher still alive reads end of file and ends the sandbox
            self._control = None
        self._root_pid = self._kernel_pid = None
        self._reports = b""
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None

    def _startup_log(self) -> str:
        said = ""
        if self._log is not None:  # what bwrap or unshare said before the launcher took over
            self._log.seek(0)
            said = self._log.read()[-2000:].decode(errors="replace").strip()
        return "\n".join(p for p in (said, self._kernel_log()) if p)

    def _death_detail(self, code: int | None) -> str:
        if code in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU):
            return f": it used up its {self.limits.cpu_seconds} s of CPU or was killed"
        return ""

    # ---- the unisolated kernel: a plain child process --------------------------------------------------------
    def _spawn_kernel(self) -> None:
        if self.isolation != "unisolated":
            return super()._spawn_kernel()
        self._folder = self._folder or private_folder(UNISOLATED_PREFIX)
        env = {"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "HOME": str(self._folder)}

        def start(req_r: int, out_w: int) -> None:
            # Its scratch files in its own folder: a fixed name in the host's /tmp is anyone's to plant.
            cmd = [sys.executable, "-I", str(KERNEL), str(out_w), str(self._folder / ".images"), str(self._folder)]
            with open(self._folder / ".kernel.log", "ab") as log:
                self.proc = subprocess.Popen(cmd, stdin=req_r, stdout=subprocess.DEVNULL, stderr=log,
                                             pass_fds=(out_w,), preexec_fn=self._limits, start_new_session=True,
                                             env=env, cwd=self._folder)

        self._connect_kernel(start)

    def _kill(self) -> None:
        if self.isolation == "unisolated" and self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the kernel and everything it started
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None
        super()._kill()

    def _kernel_exit(self, wait: float) -> int | None:
        if self.isolation != "unisolated":
            return super()._kernel_exit(wait)
        try:
            return self.proc.wait(timeout=wait)  # the kernel is our own child here
        except subprocess.TimeoutExpired:
            return None

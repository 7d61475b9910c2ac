"""The same persistent Python kernel as the process sandbox, in a Docker container: one container per episode.

Each episode gets a container of its own (never a shared session: no variable, file or process outlives its
episode), made from a user-given image that holds a Python interpreter: no network at all, a read-only root file
system, memory-backed /tmp, /dev/shm and /episode of bounded size (limits.disk_mb each; nosuid, nodev), kernel.py
read-only, user nobody (65534; as a non-root host user, that user instead, so the host can reach /episode), every
capability dropped, no-new-privileges, a pids limit, a memory limit (cgroup, swap included), rlimits on CPU time,
open files and file size, and no environment variable from the host.

Two seccomp filters, stacked: the engine's default profile, and toolpath's own (seccomp.py, the one the process
sandbox runs under), which the launcher installs on itself before anything else, so every kernel inherits it.
The engine's profile alone is not enough: the engine decides what it allows (Docker 20.10's allows io_uring
and ptrace) and a daemon may be configured to apply none. The host writes the compiled program into the private
folder below; where none can be built, every result says so.

The episode folder is a tmpfs in the container, not a host folder bound into it: bounded in size, nosuid, never
on a host file system, and gone with the container. The host reads and writes it at `workdir`,
/proc/<pid>/root/episode of the container's first process, which is kernel.py's launcher: it forks a kernel when
the host asks (with the kernel's two pipes, passed over a Unix socket), kills everything else in the container
first, and reports each kernel's exit status. A cell past its wall-clock limit, or a kernel that dies, thus costs
the kernel and its variables, never the container or its files. The launcher reaches the host through a socket in
a private host folder mounted read-only into the container; once it has connected, the host removes the folder,
so nothing else in the container can connect, and nothing is left to clean up. The host holds the only end of
that connection, so a host that dies without closing the sandbox (even by SIGKILL) stops its container: the
launcher reads end of file and ends; one that exits without closing it removes it (a finalizer). The Docker SDK
does the lifecycle (create, start, kill, remove) and checks the engine; no `docker` CLI is needed. Because of the
socket, the pipes and /proc, the engine must run on this machine (a local socket): a remote engine or a Docker
Desktop VM cannot share them.

close() removes the container whatever happened. Containers carry the label toolpath.sandbox=python, so any left
by a killed host can be found: docker ps -a --filter label=toolpath.sandbox
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import struct
import tempfile
import time
import uuid
import weakref
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from .base import SandboxError, SandboxLimits, SandboxOptions
from .kernel_client import INSIDE, KERNEL, KERNEL_ENV, LAUNCH_ARGS, NOBODY, KernelSandbox
from .seccomp import SeccompUnavailable, program

DEFAULT_IMAGE = "python:3.12-slim"
IMAGE_ENV = "TOOLPATH_DOCKER_IMAGE"  # the image used when none is given
KERNEL_INSIDE = "/opt/toolpath/kernel.py"
IO_INSIDE = "/opt/toolpath/io"  # the private folder with the launcher's socket, while it connects
SECCOMP = "seccomp.bpf"  # toolpath's seccomp program, in that folder, read by the launcher before it connects
LABEL = "toolpath.sandbox"
USER = f"{NOBODY}:{NOBODY}"
PING_SECONDS = 3.0  # how long docker_works() waits for an engine: CI without one must not hang
API_SECONDS = 60.0  # one engine call (create, start, remove) once it answers
SOCKET = "/var/run/docker.sock"


# ---- engine ---------------------------------------------------------------------------------------------
def _connect(base_url: str | None = None, timeout: float = PING_SECONDS):
    """A Docker client whose engine has answered a ping, else SandboxError saying why not."""
    try:
        import docker
        import requests
    except ImportError:
        raise SandboxError("the Docker SDK for Python is not installed: pip install docker") from None
    url = base_url or os.environ.get("DOCKER_HOST")
    # The common case in CI: no engine at all. Say so at once, without a connection attempt.
    if not url and not os.path.exists(SOCKET):
        raise SandboxError(f"no Docker engine: {SOCKET} does not exist and DOCKER_HOST is not set")
    try:
        client = docker.DockerClient(base_url=url, timeout=timeout) if url else docker.from_env(timeout=timeout)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as err:
        raise SandboxError(f"no Docker engine answers at {url or 'unix://' + SOCKET}: {err}") from None
    client.api.timeout = API_SECONDS  # the ping was short; real work (create, remove) may take longer
    return client


def docker_works(base_url: str | None = None) -> str | None:
    """None when a Docker engine answers here, else the reason it does not (within a few seconds)."""
    try:
        _connect(base_url).close()
    except SandboxError as err:
        return str(err)
    return None


def _ensure_image(client, image: str, pull: bool) -> None:
    import docker

    try:
        client.images.get(image)
        return
    except docker.errors.ImageNotFound:
        if not pull:
            raise SandboxError(f"image {image!r} not found locally; build or load it first (docker build, docker "
                               f"load or docker import), or set the sandbox option pull: true to pull it") from None
    except docker.errors.APIError as err:
        raise SandboxError(f"cannot look up image {image!r}: {err.explanation or err}") from None
    try:
        client.images.pull(image)
    except docker.errors.DockerException as err:
        raise SandboxError(f"pulling image {image!r} failed: {err}") from None


def container_user() -> str:
    """Who the kernel is in the container: nobody, unless the host is another user than root; then that user, so
    the host may reach the container's /episode through /proc (which needs the same uid, or root)."""
    return USER if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}"


def container_config(image: str, io_dir: Path, limits: SandboxLimits, *, python: str = "python3",
                     cpus: float | None = None, init: bool = False, name: str | None = None,
                     user: str = USER, seccomp: bool = True) -> dict:
    """The keyword arguments of `client.containers.create` for one episode's kernel. Plain dicts (the API's own
    field names), so the confinement can be checked without the SDK or an engine. With `seccomp` the launcher
    installs the program the host wrote to `io_dir`/SECCOMP."""
    mb = 1024 * 1024
    uid, gid = user.split(":")
    bounded = f"rw,nosuid,nodev,size={limits.disk_mb}m"
    cfg = dict(
        image=image,
        command=[python, "-I", "-B", KERNEL_INSIDE, "launch", "--connect", f"{IO_INSIDE}/control", *LAUNCH_ARGS,
                 *(["--seccomp-file", f"{IO_INSIDE}/{SECCOMP}"] if seccomp else [])],
        name=name or f"toolpath-{uuid.uuid4().hex[:12]}",
        labels={LABEL: "python"},
        hostname="sandbox",
        user=user,
        working_dir=INSIDE,
        # The process sandbox's kernel environment, nothing from the host's (API keys). Less PATH: the image's
        # own says where its interpreter and tools are (/usr/local/bin, /opt/conda/bin, …).
        environment={k: v for k, v in KERNEL_ENV.items() if k != "PATH"},
        network_disabled=True,
        network_mode="none",
        read_only=True,
        # Memory-backed and bounded; their pages also count against the memory limit.
        tmpfs={"/tmp": f"{bounded},mode=1777", INSIDE: f"{bounded},mode=0700,uid={uid},gid={gid}"},
        shm_size=f"{limits.disk_mb}m",
        mounts=[
            {"Type": "bind", "Source": str(KERNEL.resolve()), "Target": KERNEL_INSIDE, "ReadOnly": True},
            {"Type": "bind", "Source": str(Path(io_dir).resolve()), "Target": IO_INSIDE, "ReadOnly": True},
        ],
        cap_drop=["ALL"],
        # The engine's default seccomp profile stays (no seccomp= here); toolpath's filter stacks on top of it.
        security_opt=["no-new-privileges"],
        ipc_mode="private",
        pids_limit=limits.processes,
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",  # the same number: no swap on top
        ulimits=[
            # CPU seconds of each process; the hard limit kills even one that ignores SIGXCPU.
            {"Name": "cpu", "Soft": limits.cpu_seconds, "Hard": limits.cpu_seconds + 1},
            {"Name": "nofile", "Soft": limits.open_files, "Hard": limits.open_files},
            {"Name": "fsize", "Soft": limits.file_size_mb * mb, "Hard": limits.file_size_mb * mb},
            {"Name": "core", "Soft": 0, "Hard": 0},
        ],
        # The engine's log of the container holds only what the launcher says before it starts; keep it small.
        log_config={"Type": "json-file", "Config": {"max-size": "1m", "max-file": "1"}},
        init=init,
        detach=True,
    )
    if cpus:
        cfg["nano_cpus"] = int(cpus * 1e9)
    return cfg


# Each option's own rule: (the types it may be, what it must be, the lowest number where it is one).
_KINDS = {"image": ((str,), "an image name", None), "python": ((str,), "the interpreter's name or path", None),
          "pull": ((bool,), "true or false", None), "init": ((bool,), "true or false", None),
          "base_url": ((str, type(None)), "an engine URL such as unix:///var/run/docker.sock", None),
          "cpus": ((int, float, type(None)), "a number from 0.01 to 3600", 0.01),
          "start_seconds": ((int, float), "a number from 1.0 to 3600", 1.0)}


def _option_problem(name: str, value: Any) -> str | None:
    """What is wrong with `value` for the option `name`, or None; one rule for a spec's options (DockerOptions)
    and a Python caller's arguments."""
    kinds, what, low = _KINDS[name]
    number = low is not None and value is not None
    if not isinstance(value, kinds) or (number and isinstance(value, bool)) or (value == "" and str in kinds) \
            or (number and not low <= value <= 3600):
        return f"expected {what}"
    return None


def _check_options(**options: Any) -> None:
    """SandboxError naming the spec field of the first option of the wrong kind."""
    for name, value in options.items():
        problem = _option_problem(name, value)
        if problem:
            raise SandboxError(f"sandbox.options.{name}: {problem}, got {value!r}")


class DockerOptions(SandboxOptions):
    image: str | None = Field(None, description="the image (default $TOOLPATH_DOCKER_IMAGE, else python:3.12-slim)")
    python: str = Field("python3", description="the interpreter's name or path in the image")
    pull: bool = Field(False, description="pull the image when it is missing (never, unless true)")
    cpus: float | None = Field(None, description="CPUs the container may use (default: no limit)")
    init: bool = Field(False, description="run Docker's init as the container's first process")
    base_url: str | None = Field(None, description="the engine's URL (default: the local socket)")
    start_seconds: float = Field(60.0, description="how long the kernel may take to start, s")

    @field_validator(*_KINDS, mode="before")
    @classmethod
    def _checked(cls, value: Any, info: ValidationInfo) -> Any:
        unset_image = info.field_name == "image" and value is None  # the default image, chosen when it starts
        problem = None if unset_image else _option_problem(info.field_name, value)
        if problem:
            raise ValueError(problem)
        return value


# ---- the sandbox ---------------------------------------------------------------------------------------
def _remove(container) -> None:
    try:
        container.remove(force=True)  # SIGKILL to everything in it, then gone
    except Exception:  # already gone, or an engine that went away: nothing more can be done here
        pass


def _peer_pid(conn: socket.socket) -> int:
    """The host pid of the process at the other end of a Unix socket (the launcher in the container)."""
    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]


class DockerSandbox(KernelSandbox):
    """A stateful Python kernel for one episode, in a container of its own. Use as a context manager."""

    isolation = "docker"
    Options = DockerOptions  # what a task spec's sandbox.options may set: the limits and these

    def __init__(self, limits: SandboxLimits | None = None, image: str | None = None, *, python: str = "python3",
                 pull: bool = False, cpus: float | None = None, init: bool = False, base_url: str | None = None,
                 start_seconds: float = 60.0):
        super().__init__()
        self.limits = limits or SandboxLimits()
        self.image = image or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE
        _check_options(image=self.image, python=python, pull=pull, cpus=cpus, init=init, base_url=base_url,
                       start_seconds=start_seconds)
        self.python, self.pull, self.cpus, self.init = python, pull, cpus, init
        self.base_url, self.start_seconds = base_url, start_seconds
        self.client = None
        self.container = None
        self._reaper: weakref.finalize | None = None  # removes the container even if close() is never called
        self._oom_seen = 0  # the container's out-of-memory kills when the running kernel started
        self._unfiltered: str | None = None  # why the container runs without toolpath's seccomp filter

    # ---- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> DockerSandbox:
        try:
            if self.client is None:
                self.client = _connect(self.base_url)
            _ensure_image(self.client, self.image, self.pull)
        except BaseException:
            self.close()  # a half-started sandbox leaves no container behind
            raise
        return super().start()

    def close(self) -> None:
        super().close()
        if self.client is not None:
            self.client.close()
            self.client = None

    def _start_box(self) -> None:
        """A new container whose launcher has connected. Its socket lives in a folder of its own only while it
        starts: a host killed later leaves nothing behind, and nothing in the container can connect again."""
        io = Path(tempfile.mkdtemp(prefix="toolpath-docker-io-"))  # 0700
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(io / "control"))
            os.chmod(io / "control", 0o600)
            filtered = self._write_seccomp(io / SECCOMP)
            if os.getuid() == 0:  # the container's user must reach and read them: that user, nobody else
                uid, gid = map(int, container_user().split(":"))
                for path in (io, io / "control", *([io / SECCOMP] if filtered else [])):
                    os.chown(path, uid, gid)
            listener.listen(1)
            self._start_container(io, filtered)
            self._control = self._await_launcher(listener)
            self._root_pid = _peer_pid(self._control)
        finally:
            listener.close()
            shutil.rmtree(io, ignore_errors=True)

    def _write_seccomp(self, path: Path) -> bool:
        """Write toolpath's seccomp program for the launcher; False (and the reason kept for every result's
        notes) where none can be built here."""
        try:
            bpf = program()
        except SeccompUnavailable as why:
            self._unfiltered = str(why)
            return False
        path.write_bytes(bpf)
        os.chmod(path, 0o400)
        return True

    def _notes(self) -> list[str]:
        if self._unfiltered is not None:
            return [f"NO SECCOMP FILTER of toolpath's, only the engine's profile: {self._unfiltered}"]
        return []

    def _start_container(self, io: Path, seccomp: bool) -> None:
        import docker

        cfg = container_config(self.image, io, self.limits, python=self.python, cpus=self.cpus, init=self.init,
                               user=container_user(), seccomp=seccomp)
        try:
            self.container = self.client.containers.create(**cfg)
            self._reaper = weakref.finalize(self, _remove, self.container)
            self.container.start()
        except docker.errors.APIError as err:
            why = err.explanation or err
            self._stop_box()
            raise SandboxError(f"the Python sandbox did not start in Docker (image {self.image!r}): {why}") from None

    def _await_launcher(self, listener: socket.socket) -> socket.socket:
        """The launcher's connection, looking every half second whether the container already gave up (a missing
        interpreter or a crash before the launcher connected)."""
        deadline = time.monotonic() + self.start_seconds
        while time.monotonic() < deadline:
            if select.select([listener], [], [], 0.5)[0]:
                conn = listener.accept()[0]
                if self._in_container(_peer_pid(conn)):
                    return conn
                conn.close()  # a host process of the same user that found the socket first
                continue
            if self._state().get("Status") in ("exited", "dead"):
                break
        why = self._diagnose()
        self._stop_box()
        raise SandboxError(f"the Python sandbox did not start in Docker (image {self.image!r}): {why}")

    def _in_container(self, pid: int) -> bool:
        """Whether host process `pid` runs in this sandbox's container (its cgroup names the container; else,
        asked of the engine, it is the container's first process or that one's child)."""
        try:
            if self.container.id in Path(f"/proc/{pid}/cgroup").read_text():
                return True
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        return self._state().get("Pid") in (pid, parent)

    def _state(self) -> dict:
        try:
            self.container.reload()
            return self.container.attrs.get("State", {})
        except Exception:  # an engine that went away: the caller reports what it could not learn
            return {}

    def _diagnose(self) -> str:
        """What the container and the kernel said before it failed to start, for the error message."""
        try:  # the launcher can end a moment before the engine marks the container exited
            self.container.wait(timeout=2)
        except Exception:
            pass
        state = self._state()
        parts = []
        if state.get("Status") in ("exited", "dead"):
            parts.append(f"exit {state.get('ExitCode')}" + (", out of memory" if state.get("OOMKilled") else ""))
        if state.get("Error"):
            parts.append(state["Error"])
        try:
            parts.append(self.container.logs(tail=40).decode(errors="replace").strip())
        except Exception:
            pass
        text = "; ".join(p for p in parts if p)
        return text or f"no answer within {self.start_seconds:g} s"

    def _startup_log(self) -> str:
        said = self._diagnose() if self.container is not None else ""
        return "; ".join(p for p in (said, self._kernel_log()) if p)

    def _stop_box(self) -> None:
        if self._reaper is not None:
            self._reaper()  # removes the container; a finalizer runs once, here or at the interpreter's exit
            self._reaper = None
        self.container = None
        if self._control is not None:
            self._control.close()
            self._control = None
        self._root_pid = self._kernel_pid = None
        self._reports = b""

    def _open_kernel(self) -> None:
        super()._open_kernel()
        self._oom_seen = self._oom_kills()

    def _oom_kills(self) -> int:
        """How many processes the container's memory cgroup has killed (its launcher's cgroup, read on the
        host: cgroup v1's memory.oom_control or v2's memory.events); 0 where that cannot be read."""
        try:
            lines = Path(f"/proc/{self._root_pid}/cgroup").read_text().splitlines()
        except (OSError, TypeError):
            return 0
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                files = [Path("/sys/fs/cgroup/memory" + path, "memory.oom_control")]
            elif controllers == "":
                files = [Path("/sys/fs/cgroup" + path, "memory.events")]
            else:
                continue
            for f in files:
                try:
                    counts = dict(row.split() for row in f.read_text().splitlines() if len(row.split()) == 2)
                    return int(counts.get("oom_kill", 0))
                except (OSError, ValueError):
                    continue
        return 0

    def _death_detail(self, code: int | None) -> str:
        if code == -9 and self._oom_kills() > self._oom_seen:
            return f": it ran out of its {self.limits.memory_mb} MB of memory"
        if code in (-9, -24, 137, 128 + 24):  # SIGKILL, SIGXCPU
            return f": it used up its {self.limits.cpu_seconds} s of CPU or was killed"
        return ""

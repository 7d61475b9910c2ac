"""The same persistent Python kernel as the process sandbox, in a Docker container: one container per episode.

Each episode gets a container of its own (never a shared session: no variable, file or process outlives its
episode), made from a user-given image that holds a Python interpreter: no network at all, a read-only root file
system, a private tmpfs /tmp, the episode's folder read-write at /episode, kernel.py read-only, user nobody
(65534), every capability dropped, no-new-privileges, a pids limit, a memory limit (cgroup, swap included),
rlimits on CPU time, open files and file size, and no environment variable from the host.

The protocol is kernel.py's own (JSON lines: requests on its stdin, responses on a dedicated fd), carried by two
named pipes in a private host folder that is mounted read-only into the container. A tiny launcher opens them as
the kernel's stdin and response fd, then execs the kernel; once the kernel says it is ready the host removes the
folder, so nothing else in the container can open the pipes, and nothing is left to clean up. The host holds the
only writer of the kernel's stdin, so a host that dies without closing the sandbox (even by SIGKILL) stops its
container: the kernel reads end of file; one that exits without closing it removes it (a finalizer). The Docker
SDK does the lifecycle (create, start, kill, remove) and checks the engine; no `docker` CLI is needed. Because of
the pipes and the bind mount, the engine must run on this machine (a local socket): a remote engine or a Docker
Desktop VM cannot share them.

A cell past its wall-clock limit, or a kernel that dies, costs the container: it is removed and a fresh one made,
and the result says the variables are lost. close() removes the container whatever happened. Containers carry the
label toolpath.sandbox=python, so any left by a killed host can be found: docker ps -a --filter label=toolpath.sandbox
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
import weakref
from pathlib import Path

from .base import SandboxError, SandboxLimits
from .kernel_client import INSIDE, KERNEL, KERNEL_ENV, NOBODY, KernelPipe, KernelSandbox

DEFAULT_IMAGE = "python:3.12-slim"
IMAGE_ENV = "TOOLPATH_DOCKER_IMAGE"  # the image used when none is given
KERNEL_INSIDE = "/opt/toolpath/kernel.py"
IO_INSIDE = "/opt/toolpath/io"  # the private folder with the two named pipes
LABEL = "toolpath.sandbox"
USER = f"{NOBODY}:{NOBODY}"
PING_SECONDS = 3.0  # how long docker_works() waits for an engine: CI without one must not hang
API_SECONDS = 60.0  # one engine call (create, start, remove) once it answers
SOCKET = "/var/run/docker.sock"

# Runs as `python -I -B -c LAUNCHER REQUESTS RESPONSES` in the container, then becomes the kernel.
LAUNCHER = """\
import os, sys
# The kernel runs as nobody, so what it writes in /episode must stay removable by a host user that is not.
os.umask(0)
# The host holds the only writer: when it goes, however it dies, the kernel reads end of file and exits, and
# the container stops with it (what bwrap's --die-with-parent does for the process sandbox).
req = os.open(sys.argv[1], os.O_RDONLY)
os.dup2(req, 0)
out = os.open(sys.argv[2], os.O_WRONLY)
os.set_inheritable(out, True)
# The kernel's own stdout and stderr (outside cells): a file, like the process sandbox's, never a full pipe.
os.dup2(os.open("/dev/null", os.O_WRONLY), 1)
os.dup2(os.open("/episode/.kernel.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666), 2)
os.execv(sys.executable, [sys.executable, "-I", "-B", "/opt/toolpath/kernel.py", str(out), "/episode/.images"])
"""


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


def container_config(image: str, workdir: Path, io_dir: Path, limits: SandboxLimits, *, python: str = "python3",
                     cpus: float | None = None, init: bool = False, name: str | None = None) -> dict:
    """The keyword arguments of `client.containers.create` for one episode's kernel. Plain dicts (the API's own
    field names), so the confinement can be checked without the SDK or an engine."""
    mb = 1024 * 1024
    cfg = dict(
        image=image,
        command=[python, "-I", "-B", "-c", LAUNCHER, f"{IO_INSIDE}/requests", f"{IO_INSIDE}/responses"],
        name=name or f"toolpath-{uuid.uuid4().hex[:12]}",
        labels={LABEL: "python"},
        hostname="sandbox",
        user=USER,
        working_dir=INSIDE,
        # The process sandbox's kernel environment, nothing from the host's (API keys). Less PATH: the image's
        # own says where its interpreter and tools are (/usr/local/bin, /opt/conda/bin, …).
        environment={k: v for k, v in KERNEL_ENV.items() if k != "PATH"},
        network_disabled=True,
        network_mode="none",
        read_only=True,
        # tmpfs pages count against the memory limit, so this size cannot take more than the kernel may.
        tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.memory_mb}m,mode=1777"},
        mounts=[
            {"Type": "bind", "Source": str(Path(workdir).resolve()), "Target": INSIDE, "ReadOnly": False},
            {"Type": "bind", "Source": str(KERNEL.resolve()), "Target": KERNEL_INSIDE, "ReadOnly": True},
            {"Type": "bind", "Source": str(Path(io_dir).resolve()), "Target": IO_INSIDE, "ReadOnly": True},
        ],
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        ipc_mode="private",
        pids_limit=limits.processes,
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",  # the same number: no swap on top
        ulimits=[
            # CPU seconds of the whole kernel; the hard limit kills even a PID 1 that ignores SIGXCPU.
            {"Name": "cpu", "Soft": limits.cpu_seconds, "Hard": limits.cpu_seconds + 1},
            {"Name": "nofile", "Soft": limits.open_files, "Hard": limits.open_files},
            {"Name": "fsize", "Soft": limits.file_size_mb * mb, "Hard": limits.file_size_mb * mb},
            {"Name": "core", "Soft": 0, "Hard": 0},
        ],
        # The engine's log of the container holds only what fails before the launcher redirects; keep it small.
        log_config={"Type": "json-file", "Config": {"max-size": "1m", "max-file": "1"}},
        init=init,
        detach=True,
    )
    if cpus:
        cfg["nano_cpus"] = int(cpus * 1e9)
    return cfg


# ---- the sandbox ---------------------------------------------------------------------------------------
def _remove(container) -> None:
    try:
        container.remove(force=True)  # SIGKILL to everything in it, then gone
    except Exception:  # already gone, or an engine that went away: nothing more can be done here
        pass


class DockerSandbox(KernelSandbox):
    """A stateful Python kernel for one episode, in a container of its own. Use as a context manager."""

    isolation = "docker"
    OPTIONS = ("image", "python", "pull", "cpus", "init", "base_url", "start_seconds")  # besides the limits

    def __init__(self, limits: SandboxLimits | None = None, image: str | None = None,
                 workdir: str | Path | None = None, *, python: str = "python3", pull: bool = False,
                 cpus: float | None = None, init: bool = False, base_url: str | None = None,
                 start_seconds: float = 60.0):
        super().__init__()
        self.limits = limits or SandboxLimits()
        self.image = image or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE
        self.python, self.pull, self.cpus, self.init = python, pull, cpus, init
        self.base_url, self.start_seconds = base_url, start_seconds
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="toolpath-episode-"))
        self.client = None
        self.container = None
        self._reaper: weakref.finalize | None = None  # removes the container even if close() is never called

    # ---- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> "DockerSandbox":
        try:
            if self.client is None:
                self.client = _connect(self.base_url)
            _ensure_image(self.client, self.image, self.pull)
            self.workdir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.workdir, 0o777)  # the kernel runs as nobody inside
            self._spawn()
        except BaseException:
            self.close()  # a half-started sandbox leaves no container and no folder behind
            raise
        return self

    def close(self) -> None:
        self._kill()
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _spawn_kernel(self) -> None:
        """A new container with a ready kernel. Its pipes live in a folder of their own only while it starts: a
        host killed later leaves nothing behind, and no later container sees old pipes."""
        io = Path(tempfile.mkdtemp(prefix="toolpath-docker-io-"))
        try:
            os.chmod(io, 0o755)  # nobody inside must reach the pipes; the mount is read-only anyway
            self._start_container(io)
        finally:
            shutil.rmtree(io, ignore_errors=True)  # open ends keep working; nothing else can open the pipes now

    def _start_container(self, io: Path) -> None:
        import docker

        requests_fifo, responses_fifo = io / "requests", io / "responses"
        for p in (requests_fifo, responses_fifo):
            os.mkfifo(p)
            os.chmod(p, 0o666)  # mkfifo's mode is cut by the umask; nobody inside must open them
        # Both opened before the container starts, so neither of the launcher's opens waits. O_RDWR, because a
        # write end cannot be opened before a reader exists; it is swapped for a plain one once the kernel reads.
        self._pipe = KernelPipe(os.open(requests_fifo, os.O_RDWR | os.O_NONBLOCK),
                                os.open(responses_fifo, os.O_RDONLY | os.O_NONBLOCK))
        cfg = container_config(self.image, self.workdir, io, self.limits, python=self.python, cpus=self.cpus,
                               init=self.init)
        try:
            self.container = self.client.containers.create(**cfg)
            self._reaper = weakref.finalize(self, _remove, self.container)
            self.container.start()
        except docker.errors.APIError as err:
            self._kill()
            raise SandboxError(f"the Python sandbox did not start in Docker (image {self.image!r}): "
                               f"{err.explanation or err}") from None
        if not self._await_ready():
            why = self._diagnose()
            self._kill()
            raise SandboxError(f"the Python sandbox did not start in Docker (image {self.image!r}): {why}")
        # Write-only now that the kernel holds the read end: a dead kernel is then a broken pipe, not a full one.
        rdwr, self._pipe.write_fd = self._pipe.write_fd, os.open(requests_fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(rdwr)

    def _await_ready(self) -> bool:
        """Wait for the kernel's ready line, looking every half second whether the container already gave up
        (a missing interpreter or a crash before the launcher opened the pipe never closes it)."""
        deadline = time.monotonic() + self.start_seconds
        while time.monotonic() < deadline:
            try:
                msg = self._pipe.read(timeout=0.5)
            except EOFError:
                return False
            if msg is not None:
                return bool(msg.get("ready"))
            if self._state().get("Status") in ("exited", "dead"):
                return False
        return False

    def _state(self) -> dict:
        try:
            self.container.reload()
            return self.container.attrs.get("State", {})
        except Exception:  # an engine that went away: the caller reports what it could not learn
            return {}

    def _diagnose(self) -> str:
        """What the container and the kernel said before it failed to start, for the error message."""
        self._exit_status(wait=2)  # the pipe can close a moment before the engine marks the container exited
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
        log = self.workdir / ".kernel.log"
        if log.is_file():
            parts.append(log.read_text(errors="replace")[-2000:].strip())
        text = "; ".join(p for p in parts if p)
        return text or f"no answer within {self.start_seconds:g} s"

    def _kill(self) -> None:
        if self._reaper is not None:
            self._reaper()  # removes the container; a finalizer runs once, here or at the interpreter's exit
            self._reaper = None
        self.container = None
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None

    def _exit_status(self, wait: float = 5) -> tuple[int | None, bool]:
        """(exit code, out of memory) of a container whose kernel stopped answering; None when still running."""
        try:
            code = self.container.wait(timeout=wait)["StatusCode"]
        except Exception:  # still running after `wait` seconds (a read timeout), or the engine is gone
            return None, False
        return code, bool(self._state().get("OOMKilled"))

    def _death(self) -> str:
        code, oom = self._exit_status()
        why = f"the kernel died (exit {code})" if code is not None else "the kernel stopped answering"
        if oom:
            why += f": it ran out of its {self.limits.memory_mb} MB of memory"
        elif code in (137, 128 + 24):  # SIGKILL, SIGXCPU
            why += f": it used up its {self.limits.cpu_seconds} s of CPU or was killed"
        return why

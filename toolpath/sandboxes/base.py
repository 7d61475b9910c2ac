"""The Sandbox protocol: where side effects happen. One per episode, a context manager, with limits.

What a sandbox cannot do is reported as a `SandboxError` (or in the result it returns), which the tool turns
into an error observation the agent sees; a sandbox never takes the run down with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class SandboxError(RuntimeError):
    """The sandbox could not start, or could not do what was asked."""


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 60  # CPU time of the whole kernel (RLIMIT_CPU)
    memory_mb: int = 2048  # address space (RLIMIT_AS)
    processes: int = 64  # tasks in the sandbox (cgroup pids.max where writable, else RLIMIT_NPROC)
    open_files: int = 256  # RLIMIT_NOFILE
    file_size_mb: int = 64  # largest file it may write (RLIMIT_FSIZE)
    disk_mb: int = 256  # what each memory-backed folder (/episode, /tmp, /dev/shm) may hold
    output_bytes: int = 20_000  # stdout / stderr kept per cell
    cell_seconds: float = 30.0  # wall clock per cell; past it the kernel is killed and restarted
    images: int = 10  # images returned per cell

    def __post_init__(self) -> None:
        for name, (low, high, unit) in LIMIT_RANGES.items():
            _check_limit(name, getattr(self, name), low, high, unit, whole=name != "cell_seconds")


# What each limit may be: (lowest, highest, unit). The highest values keep the kernel's own arithmetic (bytes
# in a 64-bit rlimit, a pipe line the host reads) far from overflow; they are not advice.
LIMIT_RANGES = {"cpu_seconds": (1, 10_000_000, "s"), "memory_mb": (1, 1 << 20, "MB"), "processes": (1, 1 << 22, ""),
                "open_files": (1, 1 << 20, ""), "file_size_mb": (1, 1 << 20, "MB"), "disk_mb": (1, 1 << 20, "MB"),
                "output_bytes": (1, 1_000_000, "bytes"), "cell_seconds": (0.001, 7 * 86_400, "s"),
                "images": (0, 1000, "")}


def _check_limit(name: str, value, low, high, unit: str, whole: bool) -> None:
    """SandboxError naming the spec field unless `value` is a number of the right kind within [low, high]."""
    kind = (int,) if whole else (int, float)
    ok = isinstance(value, kind) and not isinstance(value, bool) and low <= value <= high  # NaN fails the range
    if not ok:
        what = "a whole number" if whole else "a number"
        raise SandboxError(f"sandbox.options.{name}: expected {what} from {low} to {high}"
                           f"{' ' + unit if unit else ''}, got {value!r}")


class Sandbox(Protocol):
    limits: SandboxLimits

    def start(self) -> "Sandbox": ...

    def close(self) -> None: ...

    def __enter__(self) -> "Sandbox": ...

    def __exit__(self, *exc) -> None: ...


def stage_inputs(box, files: list[Path], images: dict[str, Path]) -> None:
    """A code sandbox's task inputs: `files` copied under inputs/ in its working folder (readable by the
    sandbox's user), and `images` loaded there as PIL images under their names (image_1, …), the names the image
    tools use. A sandbox without a working folder (browser, desktop) gets nothing: it shows its own screen.
    Raises OSError when the files do not fit."""
    import os
    import shutil

    workdir = getattr(box, "workdir", None)
    if workdir is None:
        return
    if files:
        folder = workdir / "inputs"
        folder.mkdir(exist_ok=True)
        for p in files:
            shutil.copyfile(p, folder / p.name)
            os.chmod(folder / p.name, 0o644)
    if images and hasattr(box, "preload"):
        box.preload("\n".join(["from PIL import Image as _Image"] + [
            f"{name} = _Image.open({('inputs/' + Path(path).name)!r}); {name}.load()" for name, path in images.items()]))

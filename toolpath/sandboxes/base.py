"""The Sandbox protocol: where side effects happen. One per episode, a context manager, with limits.

What a sandbox cannot do is reported as a `SandboxError` (or in the result it returns), which the tool turns
into an error observation the agent sees; a sandbox never takes the run down with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ..kinds import validated


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
        for name in LIMIT_RANGES:  # a Python caller's limits: the same rule as a spec's (SandboxOptions)
            value = getattr(self, name)
            problem = limit_problem(name, value)
            if problem:
                raise SandboxError(f"sandbox.options.{name}: {problem}, got {value!r}")


# What each limit may be: (lowest, highest, unit). The highest values keep the kernel's own arithmetic (bytes
# in a 64-bit rlimit, a pipe line the host reads) far from overflow; they are not advice.
LIMIT_RANGES = {"cpu_seconds": (1, 10_000_000, "s"), "memory_mb": (1, 1 << 20, "MB"), "processes": (1, 1 << 22, ""),
                "open_files": (1, 1 << 20, ""), "file_size_mb": (1, 1 << 20, "MB"), "disk_mb": (1, 1 << 20, "MB"),
                "output_bytes": (1, 1_000_000, "bytes"), "cell_seconds": (0.001, 7 * 86_400, "s"),
                "images": (0, 1000, "")}


def limit_problem(name: str, value: Any) -> str | None:
    """What is wrong with `value` for the limit `name` (a number of the right kind within its range), or None.
    Strict on purpose: a limit written as text or as true is a mistake in the spec, not a number to guess at."""
    low, high, unit = LIMIT_RANGES[name]
    whole = name != "cell_seconds"
    kind = (int,) if whole else (int, float)
    if isinstance(value, kind) and not isinstance(value, bool) and low <= value <= high:  # NaN fails the range
        return None
    return f"expected {'a whole number' if whole else 'a number'} from {low} to {high}{' ' + unit if unit else ''}"


class SandboxOptions(BaseModel):
    """What a spec's `sandbox.options` may set: the limits every sandbox has; a kind declares its own options
    as a subclass (its `Options`). Read once, before the episode starts (`read_options`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_seconds: int = Field(SandboxLimits.cpu_seconds, description="CPU time of the whole kernel, s (RLIMIT_CPU)")
    memory_mb: int = Field(SandboxLimits.memory_mb, description="address space, MB (RLIMIT_AS)")
    processes: int = Field(SandboxLimits.processes, description="tasks in the sandbox (pids cgroup, else "
                                                                "RLIMIT_NPROC)")
    open_files: int = Field(SandboxLimits.open_files, description="open files (RLIMIT_NOFILE)")
    file_size_mb: int = Field(SandboxLimits.file_size_mb, description="largest file it may write, MB")
    disk_mb: int = Field(SandboxLimits.disk_mb, description="what each of /episode, /tmp, /dev/shm may hold, MB")
    output_bytes: int = Field(SandboxLimits.output_bytes, description="stdout / stderr kept per cell")
    cell_seconds: float = Field(SandboxLimits.cell_seconds, description="wall clock per cell, s")
    images: int = Field(SandboxLimits.images, description="images returned per cell")

    @field_validator(*LIMIT_RANGES, mode="before")
    @classmethod
    def _limit(cls, value: Any, info: ValidationInfo) -> Any:
        problem = limit_problem(info.field_name, value)
        if problem:
            raise ValueError(problem)
        return value

    def limits(self) -> SandboxLimits:
        return SandboxLimits(**{name: getattr(self, name) for name in LIMIT_RANGES})

    def own(self) -> dict[str, Any]:
        """The kind's own options (not the limits), as its constructor takes them."""
        return {name: getattr(self, name) for name in type(self).model_fields if name not in LIMIT_RANGES}


def read_options(cls: Any, values: dict[str, Any], kind: str) -> SandboxOptions:
    """A spec's `sandbox.options` for the sandbox class `cls` (registered as `kind`) as its typed Options; one
    ValueError naming every bad field ("sandbox.options.memory_mb: ...")."""
    return validated(getattr(cls, "Options", SandboxOptions), values, "sandbox.options", f"sandbox {kind!r}")


def open_sandbox(cls: Any, options: SandboxOptions) -> Any:
    """An unstarted sandbox of `cls` with `options` (read by read_options)."""
    return cls(options.limits(), **options.own())


def read_by(readers: dict[str, Callable[[Any], Any]]) -> Any:
    """An Options field validator: each of `readers`' fields must pass its reader, the sandbox's own check of
    that option (its constructor's too), which raises a SandboxError or ValueError naming what is wrong."""
    def read(cls, value: Any, info: ValidationInfo) -> Any:
        try:
            readers[info.field_name](value)
        except (SandboxError, ValueError) as err:
            raise as_value_error(err) from None
        return value

    return field_validator(*readers, mode="before")(classmethod(read))


def as_value_error(err: Exception) -> ValueError:
    """A sandbox's own check of an option (a SandboxError "NAME: what is wrong") as the ValueError its Options
    validator raises: the error names the field and the value given already, so the option's own "NAME: " and
    ", got VALUE" are dropped."""
    return ValueError(str(err).split(": ", 1)[-1].rsplit(", got ", 1)[0])


class Sandbox(Protocol):
    Options: ClassVar[type[SandboxOptions]]  # what a spec's sandbox.options may set for this kind
    limits: SandboxLimits

    def start(self) -> Sandbox: ...

    def close(self) -> None: ...

    def __enter__(self) -> Sandbox: ...

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
            f"{name} = _Image.open({('inputs/' + Path(path).name)!r}); {name}.load()"
            for name, path in images.items()]))

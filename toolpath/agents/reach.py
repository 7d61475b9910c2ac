"""What an episode may touch on disk, checked where every episode starts: the task's input files (read, copied
into the sandbox, shown to the model) and the files its agent's parameters name to write (fast_slow's
`output` and `library`).

A spec read by spec.parse_spec had its inputs checked against its folder; a task a benchmark built from its data
set (`toolpath eval`) was not, and an agent's parameters are known only to the agent. A spec or a data set may
come from anyone, so the episode checks both again, against the folders its caller names (a `spec.Reach`: the
spec's folder and the user's --allow-path folders, or a data set's folders): an input must be a regular file
within its size limit inside them; a file an agent writes must be under $TOOLPATH_HOME or inside them. Without a
reach (a nested run, whose images its caller chose by name, or a Python caller that built the spec itself) the
inputs are checked as files only and an agent writes only under $TOOLPATH_HOME.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import home as toolpath_home
from ..spec import MAX_PATH_CHARS, Reach, input_problems

if TYPE_CHECKING:
    from ..spec import TaskSpec
    from .base import Agent


class ReachError(ValueError):
    """The episode's spec names files it may not reach; `problems` holds (field, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        lines = [f"{where}: {msg}" for where, msg in problems]
        super().__init__("\n  ".join(["files out of the task's reach:", *lines]))


def checked_spec(spec: TaskSpec, agent: Agent, reach: Reach | None = None, recorded: bool = False) -> TaskSpec:
    """A copy of `spec` whose input files and written paths (`agent.written_params`) are absolute, links
    resolved, each within its allowed folders; ReachError naming every field that is not. A `recorded` spec
    (a run's, on resume) had them resolved when it started: one that resolves elsewhere now became a link."""
    spec = spec.model_copy(deep=True)
    before = {kind: list(getattr(spec.inputs, kind)) for kind in ("images", "files")}
    # Without a reach, every folder is allowed for inputs: the caller vouches for where they are, and they are
    # still checked as regular files of bounded size (a FIFO, a device, a 2 GB file are refused).
    problems = input_problems(spec, reach or Reach(Path.cwd(), [Path("/")]))
    if recorded:
        problems += [(f"inputs.{kind}[{i}]", f"{was} is a link now (to {now}); it was a file when the run started")
                     for kind, paths in before.items()
                     for i, (was, now) in enumerate(zip(paths, getattr(spec.inputs, kind)))
                     if was.is_absolute() and was != now]
    for name in agent.written_params:
        if name in spec.agent.params:
            where = f"agent.params.{name}"
            value = spec.agent.params[name]
            if recorded and isinstance(value, str):  # absolute and resolved when the run started
                path, problem = written_path(value, Reach(Path(value).parent))
                if problem is None and str(path) != value:
                    problem = f"{value} is reached through a link now (to {path}); it was not when the run started"
            else:
                path, problem = written_path(value, reach)
            if problem is None:
                spec.agent.params[name] = str(path)
            else:
                problems.append((where, problem))
    if problems:
        raise ReachError(problems)
    return spec


def written_path(value: object, reach: Reach | None) -> tuple[Path | None, str | None]:
    """(the file an agent may write, links resolved; None when refused) and why it is refused. A relative path
    is taken against the spec's folder (the home without a reach); it must end up under $TOOLPATH_HOME or a
    folder of `reach`, and may not be anything but a regular file already."""
    home = toolpath_home()
    if not isinstance(value, str) or not value.strip():
        return None, f"expected a file path, got {value!r}"
    if "\x00" in value or len(value) > MAX_PATH_CHARS:
        return None, f"not a usable file path (a NUL byte, or over {MAX_PATH_CHARS:,} characters)"
    folders = [home] + ([reach.base, *reach.allowed] if reach is not None else [])
    try:
        path = (folders[1] if reach is not None else home) / Path(value).expanduser()
        full = path.resolve()
        roots = [f.resolve() for f in folders]
    except (OSError, RuntimeError, ValueError) as err:
        return None, f"cannot use {value!r}: {err}"
    if not any(full.is_relative_to(r) for r in roots):
        named = f"{value!r} (that is {full})" if value != str(full) else repr(value)
        elsewhere = f" or the spec's folder {roots[1]}" if reach is not None else ""
        more = f" or a folder allowed with --allow-path ({', '.join(map(str, roots[2:]))})" if len(roots) > 2 else ""
        return None, (f"{named} is outside $TOOLPATH_HOME ({roots[0]}){elsewhere}{more}; a file an agent writes "
                      f"must be under one of them (--allow-path DIR admits another folder)")
    try:
        mode = full.lstat().st_mode
    except FileNotFoundError:
        return full, None
    except OSError as err:
        return None, f"cannot use {full}: {err.strerror or err}"
    if not stat.S_ISREG(mode):
        return None, f"{full} exists and is not a regular file"
    return full, None


def copy_checked(source: Path, dest: Path) -> None:
    """Copy `source` to `dest`, a path `written_path` accepted: refused (OSError) when a folder on its way became a
    link since, and written through a temporary file renamed over it, so a link put at `dest` itself is
    replaced, never followed, and a reader never sees half a file."""
    folder = dest.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if folder.resolve() != folder:
        raise OSError(f"{folder} is no longer the folder it was when the run started (a link now)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

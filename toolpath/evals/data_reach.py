"""The folders the tasks a benchmark builds may name files in: its data set's own, and those the user allowed.

A data set may come from anyone, like a spec: a row that names /proc/self/environ or ../../.ssh/id_rsa as its
image must be refused, not read, copied into the run and shown to the model. Where every sample's episode
starts it is checked against this reach (agents/reach.py), so such a row is one failed sample naming the field,
and the other samples run.

A benchmark's data is what the user pointed it at (`--data PATH`, or its environment variable: each a path the
benchmark holds), the sets it generates under $TOOLPATH_HOME/benchmarks, and the samples shipped in the
package. A benchmark that also reads from a folder it does not hold (POPE's $TOOLPATH_POPE_IMAGES) names it in
a `data_folders()` method of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..paths import home
from ..spec import Reach

SHIPPED = Path(__file__).parent / "benchmarks" / "data"


def data_folders(bench: Any) -> list[Path]:
    """The folders `bench`'s records may name files in: each path it holds (a file's folder, a folder itself),
    those its `data_folders()` names, its generated sets' folder and the package's samples."""
    held = [p if p.is_dir() else p.parent for p in vars(bench).values() if isinstance(p, Path)]
    more = getattr(bench, "data_folders", None)
    return held + [Path(p) for p in (more() if callable(more) else ())] + [home() / "benchmarks", SHIPPED]


def data_reach(bench: Any, data: str | None = None, allow_paths: Sequence[str | Path] = ()) -> Reach:
    """The reach of `bench`'s tasks: relative paths taken against `data` (the --data path: a file's folder, a
    folder itself; else the generated sets' folder), files inside its data folders or the user's `allow_paths`."""
    folders = data_folders(bench)
    if data:
        given = Path(data).expanduser()
        base = given if given.is_dir() else given.parent
    else:
        base = folders[0] if folders else home() / "benchmarks"
    return Reach(base, [*folders, *allow_paths])

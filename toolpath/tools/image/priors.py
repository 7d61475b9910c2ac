"""The priors table planners read: each edit tool's expected cost (seconds) and quality, measured here.

`toolpath tools calibrate` runs every usable edit tool on sample edits, measures seconds and the tool's own
quality check, and writes `$TOOLPATH_HOME/priors/edit_tools.json`. Planners read that file when it exists,
else the table shipped with the package (measured on a 2-core CPU when the tools were written), else the
values each tool was registered with. A row: {"cost": mean s, "cost_min": fastest s, "quality": mean check,
"n": samples}. `cost_min` is what A*'s heuristic uses, so it never overestimates a step's cost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ...paths import home
from .edit_base import EditTool

SHIPPED = Path(__file__).with_name("edit_priors.json")


@dataclass(frozen=True)
class Prior:
    cost: float  # mean seconds
    quality: float  # mean measured quality
    cost_min: float  # the fastest run seen: a lower bound for the heuristic
    n: int = 0  # how many measurements; 0 = the tool's registration default


def user_table() -> Path:
    return home() / "priors" / "edit_tools.json"


def read_table(path: Path) -> dict[str, Prior]:
    """Rows of one table file; a malformed file is an error naming it (a planner must not run on bad priors)."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"priors table {path}: cannot read it: {err}") from None
    rows = raw.get("tools") if isinstance(raw, dict) else None
    if not isinstance(rows, dict):
        raise ValueError(f"priors table {path}: expected {{\"tools\": {{name: {{cost, quality, cost_min}}}}}}")
    out = {}
    for name, row in rows.items():
        try:
            cost, quality = float(row["cost"]), float(row["quality"])
            out[name] = Prior(cost, quality, float(row.get("cost_min", cost)), int(row.get("n", 0)))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"priors table {path}: tool {name!r}: needs numbers cost and quality, "
                             f"got {row!r}") from None
    return out


def load_priors(tools: dict[str, EditTool]) -> dict[str, Prior]:
    """A prior for every tool in `tools`: the user's calibration, else the shipped table, else its defaults."""
    table: dict[str, Prior] = {}
    for path in (SHIPPED, user_table()):  # later files override earlier ones
        if path.is_file():
            table.update(read_table(path))
    # An uncalibrated tool's lower bound is 0 s: its registered cost is a guess, and a heuristic built on a
    # guess could overestimate and cost A* its optimality.
    return {name: table.get(name) or Prior(t.cost, t.quality, 0.0) for name, t in tools.items()}


def write_table(rows: dict[str, Prior], path: Path | None = None) -> Path:
    path = path or user_table()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"tools": {k: {"cost": round(p.cost, 5), "quality": round(p.quality, 4), "cost_min": round(p.cost_min, 5),
                          "n": p.n} for k, p in sorted(rows.items())}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)
    return path

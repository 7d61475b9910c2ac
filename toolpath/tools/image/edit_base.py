"""The vocabulary FaSTA*'s planners and the image-editing tools share: subtasks, the edit state, edit tools.

A multi-step instruction becomes a chain of `Subtask`s (planners/subtasks.py). Each subtask kind is done in
fixed stages (`STAGES`): recoloring an object is "locate" then "recolor"; removing it is "locate" then "fill".
Every stage has several interchangeable `EditTool`s (colour or shape segmentation for "locate", Telea or
Navier-Stokes inpainting for "fill", …). A toolpath is one tool per stage; A* (planners/astar.py) searches
over them, and learned subroutines (planners/subroutines.py) remember the ones that worked.

A tool works on an `EditState` (the image plus what earlier stages found: the target's mask, text boxes) and
returns the next state; its `check` measures how well that step did, in [0, 1], from the images alone (never
from ground truth). The tools' cost (seconds) and quality priors come from the priors table that
`toolpath tools calibrate` writes; the values given at registration are the fallback.

Everything here is plain numpy (images are H×W×3 uint8 RGB, masks H×W bool), so planners and benchmarks call
tools directly, without an agent or a run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ... import registry

# Subtask kinds, their labels (FaSTA*'s names) and the stages each is done in, in order.
KINDS = {
    "recolor": "Object Recoloration",
    "remove": "Object Removal",
    "replace": "Object Replacement",
    "text_remove": "Text Removal",
    "text_replace": "Text Replacement",
    "text_add": "Text Addition",
    "background": "Background Change",
    "upscale": "Image Upscaling",
}
STAGES: dict[str, tuple[str, ...]] = {
    "recolor": ("locate", "recolor"),
    "remove": ("locate", "fill"),
    "replace": ("locate", "fill", "draw"),
    "text_remove": ("find_text", "fill"),
    "text_replace": ("find_text", "fill", "write"),
    "text_add": ("write",),
    "background": ("foreground", "background"),
    "upscale": ("upscale",),
}

# The words the instruction grammar, the tools and the edit benchmark share. RGB values are what the
# benchmark paints and what "make it pink" means to the recolor tools.
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40), "orange": (245, 140, 30), "yellow": (240, 220, 40), "green": (50, 170, 70),
    "blue": (40, 80, 220), "purple": (140, 60, 190), "pink": (240, 120, 190), "brown": (130, 80, 40),
    "black": (20, 20, 20), "white": (245, 245, 245), "gray": (128, 128, 128), "cyan": (40, 200, 220),
}
SHAPES = ("circle", "square", "rectangle", "triangle", "star", "ellipse")
POSITIONS = ("top left", "top", "top right", "left", "center", "right", "bottom left", "bottom", "bottom right")


class EditError(Exception):
    """A tool could not do its step on this input (nothing found, bad parameter); the planner tries another."""


@dataclass(frozen=True)
class Target:
    """What a subtask is about, as the instruction names it: "the red circle", "the blue trash can"."""

    name: str  # the words as written, e.g. "red circle"
    color: str | None = None  # a colour name from COLORS, when the words have one
    shape: str | None = None  # circle, square, rectangle, triangle, star, … when the words have one

    @property
    def noun(self) -> str:
        """The name without its colour word: "red circle" → "circle"."""
        words = [w for w in self.name.split() if w != self.color]
        return " ".join(words) or self.name


@dataclass(frozen=True)
class Subtask:
    """One edit of the chain. `params` by kind: recolor {color}; replace {color, shape}; text_replace {old?, text}
    (old: the text to replace; absent means whatever text there is); text_add {text, position}; text_remove
    {text?}; background {color} ("white" when the instruction says remove); upscale {factor}."""

    id: str  # "s1", "s2", …
    kind: str  # a key of KINDS
    target: Target | None = None
    params: dict[str, Any] = field(default_factory=dict)  # see the class docstring
    parents: tuple[str, ...] = ()  # ids of subtasks whose result this one edits (the chain is a DAG)

    @property
    def label(self) -> str:
        """FaSTA*'s label, e.g. "Object Recoloration (bench → pink bench)"."""
        base = KINDS.get(self.kind, self.kind)
        what = self.target.name if self.target else ""
        if self.kind == "recolor":
            return f"{base} ({what} → {self.params.get('color')} {self.target.noun if self.target else ''})"
        if self.kind == "replace":
            return f"{base} ({what} → {self.params.get('color', '')} {self.params.get('shape', '')})".replace("( ", "(")
        if self.kind == "text_replace":
            return f"{base} ({self.params.get('old', what)!r} → {self.params.get('text')!r})"
        if self.kind == "text_add":
            return f"{base} ({self.params.get('text')!r} at {self.params.get('position')})"
        if self.kind == "upscale":
            return f"{base} (×{self.params.get('factor')})"
        if self.kind == "background":
            return f"{base} (→ {self.params.get('color', 'white')})"
        return f"{base} ({what})" if what else base


def text_query(subtask: Subtask) -> str | None:
    """The text a find step must match: params["old"] of a replacement, params["text"] of a removal; None
    when the subtask means whatever text there is."""
    key = {"text_replace": "old", "text_remove": "text"}.get(subtask.kind)
    value = subtask.params.get(key) if key else None
    return value.strip() if isinstance(value, str) and value.strip() else None


@dataclass
class EditState:
    """The image being edited and what earlier stages of the current subtask found."""

    image: np.ndarray  # H×W×3 uint8 RGB
    mask: np.ndarray | None = None  # H×W bool: the located target (or the foreground for "background")
    text_boxes: list[tuple[int, int, int, int, str]] = field(default_factory=list)  # x0, y0, x1, y1, text read
    info: dict[str, Any] = field(default_factory=dict)  # what tools want later stages or the trace to know

    def evolve(self, **changes) -> EditState:
        """A new state with some fields replaced (tools never mutate the state they are given)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class EditTool:
    name: str
    stage: str  # one of the stage names in STAGES
    kinds: tuple[str, ...]  # the subtask kinds it serves in that stage
    fn: Callable[[EditState, Subtask], EditState]  # raises EditError when it cannot do the step
    check: Callable[[EditState, EditState, Subtask], float]  # (before, after, subtask) → measured quality
    cost: float = 0.05  # fallback prior, seconds on this class of CPU
    quality: float = 0.8  # fallback prior, expected check value
    description: str = ""
    available: Callable[[], str | None] = lambda: None  # None when usable here, else why not (no weights, …)


@dataclass
class StepOutcome:
    """What running one tool on one state did: the new state (None when it raised), its measured quality and
    seconds, and the error text when it failed."""

    tool: str
    state: EditState | None
    quality: float
    seconds: float
    error: str | None = None


def register_edit_tool(t: EditTool) -> EditTool:
    for kind in t.kinds:
        if kind not in STAGES or t.stage not in STAGES[kind]:
            raise ValueError(f"edit tool {t.name}: stage {t.stage!r} is not a stage of subtask kind {kind!r}")
    return registry.add("edit_tool", t.name, t)


def edit_tools() -> dict[str, EditTool]:
    """Every registered edit tool, usable or not: the registry imports the modules that register them (its
    `edit_tool` kind: the built-in ones and plugins) the first time."""
    return registry.objects("edit_tool")


def tools_for(kind: str, stage: str) -> list[EditTool]:
    """The usable tools that can do `stage` of a `kind` subtask, in registration order."""
    return [t for t in edit_tools().values() if kind in t.kinds and t.stage == stage and t.available() is None]


def run_step(t: EditTool, state: EditState, subtask: Subtask) -> StepOutcome:
    """Run one tool and measure it. A tool's EditError (or any exception: its bug must not end the search)
    is an outcome with quality 0, not a crash."""
    from .edit_artifacts import artifact_free

    t0 = time.perf_counter()
    try:
        after = t.fn(state, subtask)
    except Exception as err:  # noqa: BLE001 — see docstring
        return StepOutcome(t.name, None, 0.0, time.perf_counter() - t0, f"{type(err).__name__}: {err}")
    seconds = time.perf_counter() - t0
    try:
        q = float(t.check(state, after, subtask))
        # a step that also blurred, noised or blocked a part it was not asked to touch did worse than it looks
        q *= artifact_free(state.image, after.image, subtask.kind, [state.mask, after.mask],
                           state.text_boxes + after.text_boxes)
    except Exception as err:  # noqa: BLE001
        return StepOutcome(t.name, after, 0.0, seconds, f"quality check failed: {type(err).__name__}: {err}")
    return StepOutcome(t.name, after, min(1.0, max(0.0, q)) if np.isfinite(q) else 0.0, seconds)


def path_cost(cost: float, quality: float, alpha: float) -> float:
    """FaSTA*'s objective for a toolpath, C^α·(2−Q)^(2−α), with α ∈ [0, 2]: α = 0 cares only for quality,
    α = 2 only for cost. Lower is better; (2 − Q) is used rather than Q so that better quality lowers it."""
    if not 0.0 <= alpha <= 2.0:
        raise ValueError(f"alpha must be in [0, 2], got {alpha}")
    return (max(cost, 0.0) ** alpha) * ((2.0 - min(max(quality, 0.0), 1.0)) ** (2.0 - alpha))

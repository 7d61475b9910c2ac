"""Measure every usable edit tool's cost (seconds) and quality (its own check) on sample edits.

For each sample (an image and one subtask), stage by stage: every tool of the stage runs on the same input
state and is measured; the best-scoring outcome becomes the input of the next stage, so a tool of a later
stage is measured on what a good earlier step leaves (a tool that raises scores quality 0). The result is
the priors table A* and the subroutine library read (priors.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import numpy as np

from .edit_base import STAGES, EditState, Subtask, run_step, tools_for
from .priors import Prior


def calibrate(samples: Iterable[tuple[np.ndarray, Subtask]], repeats: int = 1,
              progress: Callable[[int, Subtask], None] | None = None) -> dict[str, Prior]:
    """Priors measured on `samples`; `repeats` runs each tool that many times per input (the fastest run
    goes into cost_min, every run into the mean)."""
    seconds: dict[str, list[float]] = defaultdict(list)
    quality: dict[str, list[float]] = defaultdict(list)
    for i, (image, subtask) in enumerate(samples):
        if progress:
            progress(i, subtask)
        state = EditState(image=image)
        for stage in STAGES[subtask.kind]:
            best = None
            for t in tools_for(subtask.kind, stage):
                for _ in range(max(1, repeats)):
                    out = run_step(t, state, subtask)
                    seconds[t.name].append(out.seconds)
                    quality[t.name].append(out.quality)
                if out.state is not None and (best is None or out.quality > best.quality):
                    best = out
            if best is None:
                break  # nothing could do this stage here; later stages have no input to be measured on
            state = best.state
    return {name: Prior(cost=float(np.mean(s)), quality=float(np.mean(quality[name])), cost_min=float(np.min(s)),
                        n=len(s)) for name, s in seconds.items()}

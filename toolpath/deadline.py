"""A step's time budget, handed down as a deadline on the monotonic clock.

When a step starts acting, its agent turns what is left of the run's `max_seconds` into a deadline
(agents/nodes.py `step_deadline`) and gives it to the tools it calls (`ToolContext.deadline`), which give it
to their sandbox. Whatever takes time by its own measure (a wait, typing, a robot's path, a code cell) stops
by the deadline and says what it did not do. `None` means no deadline: a tool called outside an agent.
"""

from __future__ import annotations

import time

BUDGET_SPENT = "the run's time budget (limits.max_seconds) ran out"


def seconds_left(deadline: float | None) -> float | None:
    """Seconds until `deadline` (0 once it has passed), or None without one."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def clamp(seconds: float, deadline: float | None) -> float:
    """`seconds`, cut down to what is left before `deadline`."""
    left = seconds_left(deadline)
    return seconds if left is None else min(seconds, left)


def passed(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def cut_seconds(done: float, asked: float) -> str:
    """'2 s', or '0.8 s of the 2 asked (…ran out)' for a wait the deadline cut short."""
    return f"{asked:g} s" if done >= asked else f"{done:.3g} s of the {asked:g} asked ({BUDGET_SPENT})"


def cut_typing(message: str, typed: int) -> str:
    """The account of typing `message`: what was typed, and what the deadline left untyped."""
    shown = message[:typed] if typed <= 60 else message[:57] + "..."
    if typed >= len(message):
        return f"typed {shown!r}"
    return f"typed the first {typed} of {len(message)} characters ({shown!r}); the rest was not typed: {BUDGET_SPENT}"

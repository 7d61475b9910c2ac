"""The shape every WebArena evaluator reports in (WebArena's own and WebArena-Verified's): one module both
evaluator modules import, so neither imports the other's internals.

    result(kind, score, items, unscorable=None) -> {"type", "score", "items"[, "unscorable"]}

A score of None means the outcome depends on something that could not be judged offline; a zero still
decides (a failed check fails the task whatever the unscorable part would have said).
"""

from __future__ import annotations

from typing import Any


def result(kind: str, score: float | None, items: list, unscorable: str | None = None) -> dict:
    if unscorable is not None and score is not None and score != 0:
        score = None  # passed so far, but the rest could not be judged
    out: dict[str, Any] = {"type": kind, "score": score, "items": items}
    if unscorable is not None and score is None:
        out["unscorable"] = unscorable
    return out

"""What curation scores: one item per text file, JSONL line or stored run."""

from __future__ import annotations

from dataclasses import dataclass, field


class CurateError(ValueError):
    """Input the user must fix (a source, a filter, a selection, a model): one line naming what and where."""


@dataclass
class Item:
    source: str  # where it came from: a file path, "FILE:LINE", or "run:ID"
    text: str  # what the scorers read
    messages: list[dict] | None = None  # a run's conversation in the chat fine-tuning form (export.py)
    meta: dict = field(default_factory=dict)  # a run's status, score, benchmark, model
    scores: dict[str, float] = field(default_factory=dict)  # by scorer name; `score` is the chosen one

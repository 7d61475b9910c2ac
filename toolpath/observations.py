"""What an agent hands a policy besides the conversation: typed observations.

A language model reads the prompt; a rule-based decider (toolpath/baselines) reads these instead, so the
prompt's wording is free to change without breaking it. An agent builds one per policy call and passes it as
the keyword `observation` to a policy that declares `observes` (policies.base.Policy); what it holds follows
what the policy declares ("dom" adds the page's elements, "truth" the simulator's scene truth).

This module is floor 0: it imports nothing of toolpath.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScreenObservation:
    """One step of the computer-use agent: the task, what was done so far, and the screen."""

    task: str  # the instruction, as the spec gives it
    history: tuple[str, ...] = ()  # the operations of earlier steps the prompt shows, oldest first
    screenshot: str | None = None  # the path of the current screenshot (an artifact of the run)
    screen: tuple[int, int] | None = None  # its width and height in screen pixels
    # The page's elements (tag, text, box, ...), each box [x1, y1, x2, y2] already in the run's coordinate
    # convention; empty unless the policy observes "dom".
    elements: tuple[dict[str, Any], ...] = ()
    urls: tuple[str, ...] = ()  # the spec's input URLs

    @property
    def step(self) -> int:
        """This step's number as the prompt counts it (the history shown, plus one)."""
        return len(self.history) + 1


@dataclass(frozen=True)
class SceneObservation:
    """One question of the embodied agent about the camera image, in FSD's grammar."""

    task: str  # the pick-and-place instruction
    question: str  # one of policies.formats.fsd.QUESTIONS, or an identify question
    image: str | None = None  # the path of the rgb image
    size: tuple[int, int] | None = None  # its width and height in pixels
    # The simulator's objects ({"index", "name", "kind", "color", "box" on the 0-1000 grid}) and the path of
    # the segmentation image (pixel value = index + 1 of the object seen there, 0 elsewhere); only for a
    # policy that observes "truth" and a sandbox that knows it.
    truth: tuple[dict[str, Any], ...] = field(default=())
    segmentation: str | None = None

"""DAG-MATH: a chain of thought read as a directed acyclic graph, and an agent run read the same way.

A step is a node: its id, the ids of the earlier steps it uses (none for a fact taken from the problem) and
what it states; the last step states the final answer (`The final answer is $\\boxed{...}$`). A trajectory is
closed when every step but the final one is used by a later step.

    reader    text (the official JSON list of steps, fenced or not) -> Trajectory, or DagSyntaxError
    rules     Trajectory -> every Violation of the format's rules, each named (forward_reference, cycle, ...)
    metrics   Trajectory -> Check: valid, closed, closeness, answer, depth, width, branching
    answer    the boxed answer (nested braces) and whether two answers are equal (math-verify, else sympy)
    runs      a stored run's steps -> Trajectory (tool results as nodes), so its closeness is measured alike
"""

from __future__ import annotations

from .metrics import Check, check, check_text
from .reader import DagSyntaxError, Step, Trajectory, read_trajectory
from .rules import Violation, violations

__all__ = ["Check", "DagSyntaxError", "Step", "Trajectory", "Violation", "check", "check_text", "read_trajectory",
           "violations"]

"""The instruction that asks a model for a DAG-MATH trajectory: the format's rules and two worked examples,
written for toolpath (the official few-shot instruction asks for the same structure in its own words).

    instruction(problem) -> str
"""

from __future__ import annotations

import json

RULES = """\
Solve the problem as a graph of small steps. Reply with JSON only: a list of steps, nothing before or after it.

Each step is an object with four keys:
- "step_id": an integer. The first step is 1; each next step has a larger id.
- "edge": one sentence saying how this step follows from the steps it uses.
- "direct_dependent_steps": the ids of the earlier steps this step uses, smallest first; null when the step \
only restates a fact given in the problem.
- "content": one short statement: a given fact, an equation, or a computed value.

Rules:
- A step may use earlier steps only.
- Every step except the last one must be used by some later step. Leave out steps nothing uses.
- The last step is exactly: The final answer is $\\boxed{ANSWER}$. No other step contains \\boxed."""


def _step(sid: int, edge: str, uses: list[int] | None, content: str) -> dict:
    return {"step_id": sid, "edge": edge, "direct_dependent_steps": uses, "content": content}


EXAMPLES = [
    ("A box holds 6 eggs. Sam buys 3 boxes and then breaks 2 eggs. How many whole eggs does Sam have?", [
        _step(1, "Given in the problem.", None, "A box holds $6$ eggs."),
        _step(2, "Given in the problem.", None, "Sam buys $3$ boxes."),
        _step(3, "Given in the problem.", None, "Sam breaks $2$ eggs."),
        _step(4, "Multiply the eggs per box (step 1) by the boxes (step 2).", [1, 2],
              "Sam buys $6 \\cdot 3 = 18$ eggs."),
        _step(5, "Take the broken eggs (step 3) from the eggs bought (step 4).", [3, 4],
              "Sam has $18 - 2 = 16$ whole eggs."),
        _step(6, "Step 5 is the quantity asked for.", [5], "The final answer is $\\boxed{16}$."),
    ]),
    ("Solve for x: 4x - 3 = x + 9.", [
        _step(1, "Given in the problem.", None, "$4x - 3 = x + 9$."),
        _step(2, "Subtract x from both sides of step 1.", [1], "$3x - 3 = 9$."),
        _step(3, "Add 3 to both sides of step 2.", [2], "$3x = 12$."),
        _step(4, "Divide both sides of step 3 by 3.", [3], "$x = 4$."),
        _step(5, "Step 4 gives x.", [4], "The final answer is $\\boxed{4}$."),
    ]),
]


def instruction(problem: str) -> str:
    """The whole prompt for one problem: rules, the examples, then the problem."""
    shown = "\n\n".join(f"Problem: {p}\nSolution:\n{json.dumps(steps, indent=1)}" for p, steps in EXAMPLES)
    return f"{RULES}\n\nExamples:\n\n{shown}\n\nNow solve this one.\n\nProblem: {problem}\nSolution:"

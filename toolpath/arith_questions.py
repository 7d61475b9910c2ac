"""The arithmetic questions of the built-in `arith` benchmark, generated from a seeded random source.

Floor 0 because two floors read them: the benchmark (evals) asks them, and weight tailoring (compress, below
evals) renders solved episodes of the same kind as its tool-call calibration text.
"""

from __future__ import annotations

import random

CATEGORIES = ("add", "sub", "mul", "div", "mixed")


def question(rng: random.Random, category: str) -> tuple[str, str, int]:
    """(question text, the expression the calculator is given, the exact answer) for one category."""
    a, b, c = rng.randint(12, 999), rng.randint(12, 999), rng.randint(2, 40)
    if category == "add":
        return f"What is {a} + {b}?", f"{a} + {b}", a + b
    if category == "sub":
        return f"What is {a} - {b}?", f"{a} - {b}", a - b
    if category == "mul":
        return f"What is {a} times {b}?", f"{a} * {b}", a * b
    if category == "div":
        return f"What is {a * c} divided by {c}?", f"{a * c} / {c}", a
    return f"What is ({a} + {b}) * {c}?", f"({a} + {b}) * {c}", (a + b) * c

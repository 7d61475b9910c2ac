"""Shared scorers. Each takes the agent's answer and the expected value and returns a score in [0, 1].

The answer is model output: untrusted text of any shape. Scorers never raise on it; they score it 0.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

Scorer = Callable[[str | None, Any, dict], float]

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s.-]", " ", text.lower()).split()).strip(" .")


def exact(answer: str | None, expected: Any, options: dict) -> float:
    return float(answer is not None and _norm(answer) == _norm(str(expected)))


def contains(answer: str | None, expected: Any, options: dict) -> float:
    return float(answer is not None and _norm(str(expected)) in _norm(answer))


def numbers_in(text: str) -> list[float]:
    out = []
    for m in _NUMBER.finditer(text):
        s = m.group(0)
        if not s or not re.search(r"\d", s):
            continue
        try:
            out.append(float(s.replace(",", "")))
        except ValueError:
            continue
    return out


def numeric(answer: str | None, expected: Any, options: dict) -> float:
    """1 if the answer's number equals the expected one within rel_tol (default 1e-6) or abs_tol.

    With `last: true` (default) only the last number in the answer counts, since models tend to show their
    working before the result; `any: true` accepts any number in the answer.
    """
    if answer is None:
        return 0.0
    try:
        target = float(expected)
    except (TypeError, ValueError):
        return 0.0
    nums = numbers_in(answer)
    if not nums:
        return 0.0
    rel, abs_ = float(options.get("rel_tol", 1e-6)), float(options.get("abs_tol", 1e-9))
    candidates = nums if options.get("any") else nums[-1:]
    return float(any(math.isclose(n, target, rel_tol=rel, abs_tol=abs_) for n in candidates))


def choice(answer: str | None, expected: Any, options: dict) -> float:
    """Multiple choice: the first standalone option letter (A-Z, or "(B)", "B." …) equals the expected letter."""
    if answer is None:
        return 0.0
    m = re.search(r"(?<![A-Za-z])\(?([A-Z])\)?(?![A-Za-z])", answer.strip())
    return float(bool(m) and m.group(1) == str(expected).strip().strip("()").upper())


SCORERS: dict[str, Scorer] = {"exact": exact, "contains": contains, "numeric": numeric, "choice": choice}


def score(evaluator, answer: str | None) -> float | None:
    """Score an answer with a spec's EvaluatorSpec; None when the spec has no evaluator."""
    if evaluator is None:
        return None
    fn = SCORERS.get(evaluator.name)
    if fn is None:
        raise ValueError(f"unknown evaluator {evaluator.name!r}; available: {', '.join(sorted(SCORERS))}")
    return fn(answer, evaluator.expected, evaluator.options)

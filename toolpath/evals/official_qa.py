"""The published scorers of the question-answering benchmarks, reproduced exactly, bugs included.

These are what `scoring: official` applies (benchmarks/base.py says what the modes are); `scorers.py` holds
ours. Each function takes the reply as the published pipeline would have held it and the expected value as
the benchmark file gives it, and returns that scorer's per-question credit. Where a published scorer would
crash instead of scoring (a ground truth of 0 divides by zero), the question scores 0 here, since a
scorer of model output never raises.

Omni3D-Bench has two published scorers that disagree:

    vadar_omni3d       VADAR's `Engine.write_summarized_results` (github damianomarsili/VADAR, engine/engine.py,
                       commit 56018eb): the reply as it is, no tag extraction
    vlmevalkit_omni3d  VLMEvalKit's `Omni3DBench_acc` (vlmeval/dataset/utils/omni3dbench.py): the text between
                       <ans> and </ans> when there is an <ans>, else the reply

MindCube's is `extract_answer` + `extracted == gt_answer` (github mll-lab-nu/MindCube,
src/evaluation/core/extractors.py and src/evaluation/evaluator.py, commit 6d8fd9a).
"""

from __future__ import annotations

import re
from typing import Any

# VADAR's and VLMEvalKit's MRA thresholds, in their order; a prediction counts at θ when |gt − pred| / gt < θ.
OMNI3D_THRESHOLDS = (0.5, 0.45, 0.40, 0.35, 0.3, 0.25, 0.2, 0.15, 0.1, 0.05)


def _reply(answer: Any) -> str:
    # A missing reply is an empty cell in VADAR's CSV and an empty prediction in VLMEvalKit's table.
    return "" if answer is None else str(answer)


def _python_int(text: str) -> int | None:
    """int(text) as Python reads it: " 3 " and "+3" and "3_000" are numbers, "3.0" and "three" are not."""
    try:
        return int(text)
    except ValueError:
        return None


def _python_float(text: str) -> float | None:
    try:
        return float(text)  # "nan", "inf", "1e3", "1_000" all read, as float() reads them
    except ValueError:
        return None


def _omni3d_float(pred_text: str, gt: Any) -> float:
    """The share of thresholds θ with |gt − pred| / gt < θ.

    Published bugs, reproduced: a negative ground truth makes the ratio negative, so every prediction passes
    every threshold (gt −2, pred 40 → 1.0); a ground truth of 0 raises ZeroDivisionError there and stops the
    whole evaluation (here: 0); "nan" reads as a number that passes nothing, "inf" likewise."""
    pred = _python_float(pred_text)
    gt_value = float(gt)
    if pred is None or gt_value == 0:
        return 0.0
    return sum(abs(gt_value - pred) / gt_value < t for t in OMNI3D_THRESHOLDS) / len(OMNI3D_THRESHOLDS)


def _omni3d_int(pred_text: str, gt: Any) -> float:
    pred = _python_int(pred_text)
    return float(pred is not None and pred == int(gt))


def vadar_omni3d(answer: Any, expected: Any, answer_type: str) -> float:
    """VADAR's credit for one question.

    int: int(reply) == gt, so "3.0", "3 chairs" and "three" score 0. float: _omni3d_float. str: gt == reply
    .lower(), yes/no and the rest alike: "Yes." and "yes, it is" score 0. Bug, reproduced: the ground truth is
    not lowercased, so an answer such as "NE" (a compass direction) can never be matched, "NE" and "ne"
    both score 0."""
    pred = _reply(answer)
    if answer_type == "int":
        return _omni3d_int(pred, expected)
    if answer_type == "float":
        return _omni3d_float(pred, expected)
    return float(str(expected) == pred.lower())


def vlmevalkit_extract(answer: Any) -> str:
    """VLMEvalKit's extract_answer: what follows the first <ans> up to the next </ans>, else the reply."""
    text = _reply(answer)
    return text.split("<ans>")[1].split("</ans>")[0] if "<ans>" in text else text


def vlmevalkit_omni3d(answer: Any, expected: Any, answer_type: str) -> float:
    """VLMEvalKit's credit for one question: VADAR's rules on the <ans> text, except yes/no.

    Bug, reproduced: yes/no is a substring test, gt in reply.lower() (or "true" for yes, "false" for no),
    so "I do not know" and "not sure" are right for "no" (both hold the letters "no"), "yes and no" is right
    for either, and "unknown" is right for "no". The multiple-choice rule is VADAR's, "NE" included."""
    pred = vlmevalkit_extract(answer)
    if answer_type == "int":
        return _omni3d_int(pred, expected)
    if answer_type == "float":
        return _omni3d_float(pred, expected)
    gt, low = str(expected), pred.lower()
    if gt in ("yes", "no"):
        return float(gt in low or (gt == "yes" and "true" in low) or (gt == "no" and "false" in low))
    return float(gt == low)


OMNI3D_SCORERS = {"vadar": vadar_omni3d, "vlmevalkit": vlmevalkit_omni3d}


# ---- MindCube ---------------------------------------------------------------------------------------------

_IN_SECTION = (r"[Mm]y answer is ([A-E])", r"[Mm]y answer is ([A-E])\.", r"[Tt]he answer is ([A-E])",
               r"(?:Answer: )?([A-E])\.", r"\b([A-E])\b")
_PRIORITY = (r"(?:Answer: )?([A-E])\. [A-Za-z0-9 \-\(\)\'\",]+(?=(?:\n|$|\.|\"))",
             r"(?:Answer: )?([A-E])\. [A-Za-z0-9 \-\(\)\'\"]+",
             r"(?:^|\n)(?:Answer: )?([A-E])(?:\.|$|\s)",
             r"[\*\"]([A-E])[\*\"]",
             r"\bAnswer:?\s*([A-E])\b",
             r"[Mm]y answer is ([A-E])",
             r"[Mm]y answer is ([A-E])\.",
             r"answer is ([A-E])")


def _last(pattern: str, text: str) -> str | None:
    found = re.findall(pattern, text)
    return found[-1] if found else None


def mindcube_extract(text: Any) -> str | None:
    """MindCube's extract_answer, in its priority order.

    Bugs, reproduced: the first rule takes the LAST "X." anywhere in the reply before anything else, so
    "B is wrong. The answer is C" → C but "The answer is B. C. is wrong" → C, and a sentence that ends with a
    capital A-E ("I see a chair near D. The answer is B") is read as that letter; the <Answer> tag is only
    looked at when no "X." occurs at all; a lone capital A-E in any word-bounded position ("A chair") is an
    answer of last resort."""
    if not text or not isinstance(text, str):
        return None
    simple = _last(r"([A-E])\.", text)
    if simple:
        return simple
    section = re.search(r"<Answer>(.*?)(?:<|$)", text, re.DOTALL)
    if section:
        for pattern in _IN_SECTION:
            found = _last(pattern, section.group(1))
            if found:
                return found
    for pattern in _PRIORITY:
        found = _last(pattern, text)
        if found:
            return found
    lines = text.split("\n")
    described = [m.group(1) for m in (re.search(r"([A-E])\. [A-Za-z0-9 \-\(\)\'\",]+", ln) for ln in lines) if m]
    if described:
        return described[-1]
    for line in reversed(lines):
        m = re.search(r"\b([A-E])\b", line)
        if m:
            return m.group(1)
    return None


def mindcube_official(answer: Any, expected: Any) -> float:
    """MindCube's credit: the extracted letter equals gt_answer exactly as the file gives it (" b" never
    matches; our loader reads it as B)."""
    got = mindcube_extract(answer)
    return float(bool(got) and got == expected)

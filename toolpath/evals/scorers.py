"""Shared scorers. Each takes the agent's answer and the expected value and returns a score in [0, 1].

The answer is model output: untrusted text of any shape. Scorers never raise on it; they score it 0.
GUI grounding's scorers are in grounding_scorers.py (re-exported here).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from ..spec import SCORING_MODES
from .grounding_scorers import grounding, grounding_answer, point_in_box, point_in_polygon, xywh_to_xyxy
from .official_qa import OMNI3D_SCORERS, mindcube_official

Scorer = Callable[[str | None, Any, dict], float]

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def scoring_of(options: dict) -> str:
    """The scoring mode an evaluator's options ask for: "toolpath" (default) or "official"."""
    mode = options.get("scoring", "toolpath")
    if mode not in SCORING_MODES:
        raise ValueError(f"evaluator options.scoring must be one of {', '.join(SCORING_MODES)}, got {mode!r}")
    return mode


def normalised(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s.-]", " ", text.lower()).split()).strip(" .")


def exact(answer: str | None, expected: Any, options: dict) -> float:
    return float(answer is not None and normalised(answer) == normalised(str(expected)))


def contains(answer: str | None, expected: Any, options: dict) -> float:
    return float(answer is not None and normalised(str(expected)) in normalised(answer))


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
    """Multiple choice: the first standalone option letter (A-Z, or "(B)", "B." …) equals the expected letter.

    With `options.choices` (the options' texts in letter order) and toolpath scoring, a reply that names no
    letter but quotes exactly one option's text in full ("The first clip is faster") is read as that option,
    as a grader would; official scoring reads the letter only."""
    if answer is None:
        return 0.0
    m = re.search(r"(?<![A-Za-z])\(?([A-Z])\)?(?![A-Za-z])", answer.strip())
    letter = m.group(1) if m else None
    texts = options.get("choices") or []
    if letter is None and texts and scoring_of(options) == "toolpath":
        # numbers in words and in digits alike: "seven" quotes the option "7", as a grader would read it
        from ..number_words import digits

        said = f" {normalised(digits(answer))} "
        quoted = [i for i, t in enumerate(texts)
                  if normalised(str(t)) and f" {normalised(digits(str(t)))} " in said]
        letter = chr(ord("A") + quoted[0]) if len(quoted) == 1 else None
    return float(letter is not None and letter == str(expected).strip().strip("()").upper())


# ---- MindCube: the option letter, in the priority order of MindCube's own evaluator ----------------------

_LETTER_FIRST = re.compile(r"^\W*([A-E])[.)](?![A-Za-z])")  # "B." / "(B)" / "**B.** left" opening the reply
_ANSWER_SECTION = re.compile(r"<answer>(.*?)(?:<|$)", re.IGNORECASE | re.DOTALL)
# "answer" in any case, the letter only in capitals: "the answer is a chair" names no option.
_ANSWER_LABEL = re.compile(r"\b(?i:answer)\b(?:\s*(?i:is))?\s*[:：]?\s*[*(\[]*([A-E])(?![A-Za-z])")
_LONE_LETTER = re.compile(r"(?<![A-Za-z])([A-E])(?![A-Za-z])")


def _lone_letter(text: str) -> str | None:
    # A lone letter right after an apostrophe ("I'd", "don't") is part of a word, not an option.
    for m in reversed(list(_LONE_LETTER.finditer(text))):
        if m.start() == 0 or text[m.start() - 1] not in "'’":
            return m.group(1)
    return None


def mindcube_letter(text: str | None) -> str | None:
    """The option letter A-E in a reply, in MindCube's priority order, or None.

    1. the reply opens with "X." (or "X)", "(X)");  2. an <Answer> section: its own opening letter, an
    "answer is X" inside it, else its first lone letter;  3. the last "Answer: X" / "answer is X";
    4. the last lone capital A-E. MindCube's evaluator takes a bare "X." anywhere in the reply first; we
    take it only at the start, so "… not C. The answer is B" is not read as C.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    m = _LETTER_FIRST.match(text)
    if m:
        return m.group(1)
    section = _ANSWER_SECTION.search(text)
    if section:
        inner = section.group(1)
        m = _LETTER_FIRST.match(inner)
        labelled = _ANSWER_LABEL.findall(inner)
        lone = _LONE_LETTER.search(inner)
        found = m.group(1) if m else (labelled[-1] if labelled else (lone.group(1) if lone else None))
        if found:
            return found
    labelled = _ANSWER_LABEL.findall(text)
    if labelled:
        return labelled[-1]
    return _lone_letter(text)


def mindcube_choice(answer: str | None, expected: Any, options: dict) -> float:
    """1 if the reply's option letter (mindcube_letter) is the expected letter. With `options.scoring:
    official`, MindCube's own extractor and comparison (official_qa.mindcube_official) against the answer as
    the file wrote it (`options.file_answer`, else `expected`)."""
    if scoring_of(options) == "official":
        return mindcube_official(answer, options.get("file_answer", expected))
    return float(mindcube_letter(answer) == str(expected).strip().upper())


# ---- numbers: Omni3D-Bench (VADAR) and other metric answers -------------------------------------------

# MRA's tolerances 1-θ for θ = 0.50, 0.55, …, 0.95, written as exact ratios so 0.05 is 0.05, not 1-0.95.
MRA_TOLERANCES = tuple((10 - k) / 20 for k in range(10))
_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                      "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}
_TAGGED = re.compile(r"<(ans|answer)>(.*?)(?:</\1>|$)", re.IGNORECASE | re.DOTALL)


def answer_text(answer: str | None) -> str:
    """The part of a reply that is the answer: inside <ans>…</ans> or <answer>…</answer> when present
    (VADAR's and MindCube's prompts ask for those tags), else the whole reply; '' for None."""
    if not isinstance(answer, str):
        return ""
    m = _TAGGED.search(answer)
    return m.group(2) if m else answer


def answer_number(answer: str | None) -> float | None:
    """The number a reply gives: its last number (working comes before results), else a number word
    ("three"); None when it has neither or the number is not finite."""
    text = answer_text(answer)
    nums = [n for n in numbers_in(text) if math.isfinite(n)]
    if nums:
        return nums[-1]
    words = [_WORDS[w] for w in re.findall(r"[a-z]+", text.lower()) if w in _WORDS]
    return float(words[-1]) if words else None


def mra_value(pred: float, gt: float) -> float:
    """Mean relative accuracy: the share of θ in 0.50, 0.55, …, 0.95 with |pred − gt| / |gt| < 1 − θ."""
    if gt == 0:
        return float(pred == 0)
    rel = abs(pred - gt) / abs(gt)
    return sum(rel < tol for tol in MRA_TOLERANCES) / len(MRA_TOLERANCES)


def mra(answer: str | None, expected: Any, options: dict) -> float:
    """MRA of the reply's number (answer_number) against the expected one; 0 without a number."""
    pred = answer_number(answer)
    try:
        gt = float(expected)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if pred is None or not math.isfinite(gt) else mra_value(pred, gt)


def integer(answer: str | None, expected: Any, options: dict) -> float:
    """1 if the reply's number (answer_number) is exactly the expected integer (3.0 counts as 3)."""
    pred = answer_number(answer)
    try:
        return float(pred is not None and pred == int(expected))
    except (TypeError, ValueError):
        return 0.0


_LABEL = re.compile(r"^\s*(?:final\s+)?answer\s*[:：]\s*", re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_YES_NO = {"yes": "yes", "no": "no", "true": "yes", "false": "no", "yep": "yes", "yeah": "yes", "nope": "no"}


# Words that take back the answer they come with ("not sure, yes"): a grader does not count a guess it was
# told is one.
# Matched on normalised text, where "can't" reads "can t".
HEDGE = re.compile(r"\b(?:not sure|unsure|uncertain|maybe|perhaps|possibly|can ?not tell|can t tell|"
                    r"don t know|do not know|unclear|hard to say)\b")


def yes_no(text: str) -> str | None:
    """The yes or no a normalised reply gives, or None for a reply that hedges, holds both ("yes and no") or
    neither. Its first word when that is one and the other polarity is not said ("Yes, it would not be
    seen."), else the one polarity its words hold ("The answer is yes.", "I think yes"). true/false count as
    yes/no, since VADAR's prompt offers them, and so do yep/yeah/nope."""
    words = [w.strip(".,;:!?") for w in text.split()]
    said = {_YES_NO[w] for w in words if w in _YES_NO}
    if HEDGE.search(text) or len(said) != 1:
        return None
    return said.pop()


def short_answer(answer: str | None, expected: Any, options: dict) -> float:
    """Exact match of a short text answer after normalising case, punctuation, an "Answer:" label and a
    leading article; a yes/no answer is read by `yes_no`."""
    got = _ARTICLE.sub("", normalised(_LABEL.sub("", answer_text(answer))))
    want = _ARTICLE.sub("", normalised(str(expected)))
    if want in ("yes", "no"):
        return float(yes_no(got) == want)
    return float(bool(got) and got == want)


OMNI3D_TYPES = {"int": integer, "float": mra, "str": short_answer}


def omni3d(answer: str | None, expected: Any, options: dict) -> float:
    """Omni3D-Bench (VADAR): by `options.answer_type`, int → exact integer, float → MRA, str → exact text.
    With `options.scoring: official`, the published scorer `options.official` names: vadar (default, the
    benchmark's authors') or vlmevalkit (official_qa.py)."""
    kind = options.get("answer_type")
    if kind not in OMNI3D_TYPES:
        raise ValueError(f"evaluator omni3d: options.answer_type must be one of {', '.join(OMNI3D_TYPES)}, "
                         f"got {kind!r}")
    if scoring_of(options) == "official":
        which = options.get("official", "vadar")
        if which not in OMNI3D_SCORERS:
            raise ValueError(f"evaluator omni3d: options.official must be one of {', '.join(OMNI3D_SCORERS)}, "
                             f"got {which!r}")
        return OMNI3D_SCORERS[which](answer, expected, kind)
    return OMNI3D_TYPES[kind](answer, expected, options)


__all__ = ["SCORERS", "grounding", "grounding_answer", "point_in_box", "point_in_polygon", "xywh_to_xyxy"]

SCORERS: dict[str, Scorer] = {"exact": exact, "contains": contains, "numeric": numeric, "choice": choice,
                              "mindcube_choice": mindcube_choice, "mra": mra, "integer": integer,
                              "short_answer": short_answer, "omni3d": omni3d,
                              "grounding": grounding}


def score(evaluator, answer: str | None) -> float | None:
    """Score an answer with a spec's EvaluatorSpec; None when the spec has no evaluator."""
    if evaluator is None:
        return None
    fn = SCORERS.get(evaluator.name)
    if fn is None:
        raise ValueError(f"unknown evaluator {evaluator.name!r}; available: {', '.join(sorted(SCORERS))}")
    return fn(answer, evaluator.expected, evaluator.options)

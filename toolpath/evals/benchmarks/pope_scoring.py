"""POPE's scoring: a reply read as yes or no, and the set's accuracy, precision, recall, F1 and yes-ratio.

Reading a reply, two modes (benchmarks/base.py):
  official   POPE's evaluate.py exactly: keep the text before the first '.', drop commas, split on single
             spaces; "No", "no" or "not" among the words → no, anything else → yes. So "NO" and "No!" read as yes,
             an empty reply reads as yes, and "Yes, there is no doubt" reads as no (a known quirk, kept).
  toolpath   what a careful grader accepts: the reply's one yes/no word when it has exactly one polarity and
             does not hedge (scorers.yes_no: "No!", "Yes, there is." and "The answer is no." all read
             right; true/false, yep/nope count); a reply without a yes or no word is read as POPE reads it,
             a negation ("There is no circle.", "I don't see one", "cannot") → no, an affirmation ("There is a
             red circle.") → yes; a reply that hedges or holds both answers, or an empty one, is unread:
             wrong whatever the label, and never a yes.

Metrics, positive = "yes" (POPE's pos = 1): over a set of replies, TP/FP/TN/FN from each reply's label and
reading; accuracy (TP+TN)/N, precision TP/(TP+FP), recall TP/(TP+FN), F1 their harmonic mean, yes-ratio the
share of replies read as yes. evaluate.py divides by zero where a set has no yes reply or no yes label; here
that ratio is 0. The figures are pooled over the set, not averaged per reply, so each sample stores its counts
(label_yes, said_yes, said_no) and `pope_figures` pools them.
"""

from __future__ import annotations

import re

from ..scorers import (
    HEDGE,  # the phrases with which a reply takes back its own answer
    answer_text,
    yes_no,
)
from ..scorers import normalised as normalise

YES_NO_WORDS = {"yes", "no", "true", "false", "yep", "yeah", "nope"}
# After normalisation ("isn't" → "isn t", "cannot" stays): the words that negate a sentence.
NEGATIONS = {"no", "not", "none", "nothing", "nobody", "neither", "nor", "never", "cannot", "without", "t"}


def official_reading(answer: str | None) -> str:
    """POPE's evaluate.py reading of a reply: "yes" or "no" (None reads as an empty reply: yes)."""
    text = answer or ""
    if text.find(".") != -1:
        text = text.split(".")[0]
    words = text.replace(",", "").split(" ")
    return "no" if "No" in words or "not" in words or "no" in words else "yes"


def toolpath_reading(answer: str | None) -> str | None:
    """A careful grader's reading of a reply: "yes", "no", or None when it hedges, holds both or says nothing."""
    text = normalise(answer_text(answer))  # lower case; punctuation but '.' and '-' becomes space
    said = yes_no(text)
    if said is not None:
        return said
    if not text or HEDGE.search(text) or YES_NO_WORDS & _words(text):
        return None  # empty, a hedge, or both polarities (yes_no refused it)
    first = re.split(r"\.(?:\s|$)", text, maxsplit=1)[0]
    return "no" if NEGATIONS & _words(first) else "yes"


def _words(text: str) -> set[str]:
    return {w.strip(".-") for w in text.split()}


def reading(answer: str | None, scoring: str) -> str | None:
    return official_reading(answer) if scoring == "official" else toolpath_reading(answer)


def sample_counts(label: str, said: str | None) -> dict[str, float]:
    """One reply's contribution to the set's figures."""
    return {"label_yes": float(label == "yes"), "said_yes": float(said == "yes"), "said_no": float(said == "no")}


def pope_figures(samples: list[dict[str, float]]) -> dict[str, float]:
    """precision, recall, f1 and yes_ratio pooled over samples' `sample_counts` (those without them are left
    out). Accuracy is the eval's score: the mean of the samples' 1/0, the same number as (TP+TN)/N."""
    rows = [m for m in samples if "label_yes" in m]
    tp = sum(1 for m in rows if m["label_yes"] and m["said_yes"])
    fp = sum(1 for m in rows if not m["label_yes"] and m["said_yes"])
    fn = sum(1 for m in rows if m["label_yes"] and not m["said_yes"])  # an unread reply misses the object too
    n = len(rows)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "yes_ratio": (tp + fp) / n if n else 0.0}

"""CHAIR (Rohrbach, Hendricks et al. 2018): the objects a caption mentions, checked against the image's objects.

    CHAIR_s = captions with at least one hallucinated mention / captions
    CHAIR_i = hallucinated object mentions / all object mentions   (pooled over the set, not per caption)
    recall  = the image's objects some caption mention names / the image's objects (pooled; later CHAIR
              scripts report it: a model that says nothing has CHAIR 0 and recall 0)

Finding mentions (`Vocabulary.mentions`): lower-cased runs of letters; a vocabulary word's plural read as the
word ("circles", "knives", "mice", "policemen"); multi-word names matched before their words; each mention
mapped to its class (its synonym line's first word). Every occurrence counts ("a cat and another cat": two) and
negations are not parsed ("no dog" mentions a dog), as in CHAIR. Where this differs from CHAIR's chair.py:
tokens are runs of letters, not nltk's word_tokenize, and plurals come from rules over the vocabulary's own
words instead of pattern's singularize or the WordNet lemmatizer (their data are not on these machines); a
word that is no vocabulary word's plural is never changed, so the two can differ only on plurals the rules miss.

Shapes (the generated sets: pope_sources). Classes circle (disc, disk), square, rectangle (oblong), triangle,
star, ellipse (oval); a mention takes the colour word right before it, or one word further ("a red filled
circle"), never across "and"/"or"/"with"/","; colour words grey → gray, violet → purple, and teal, turquoise,
aqua → cyan (easy-vqa's "teal" and the scenes' "cyan" are one colour class: calling one the other is a colour
name, not an object that is not there). A mention is hallucinated when no object of the image is that shape
(or is also that shape: pope_sources.ALSO_TRUE, "rectangle" for a square) in that colour (any colour when the
mention has none). "shape" and "object" name no class.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .pope_sources import ALSO_TRUE

IRREGULAR = {"man": "men", "woman": "women", "child": "children", "person": "people", "mouse": "mice",
             "goose": "geese", "ox": "oxen", "foot": "feet", "tooth": "teeth", "die": "dice"}


def plurals(word: str) -> set[str]:
    """The plural forms of an English noun (the last word of a name), by the common rules."""
    if word in IRREGULAR:
        return {IRREGULAR[word]}
    out = {word + "s"}
    if word.endswith("man"):
        out.add(word[:-3] + "men")
    if word.endswith(("s", "x", "z", "ch", "sh", "o")):
        out.add(word + "es")
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        out.add(word[:-1] + "ies")
    if word.endswith("fe"):
        out.add(word[:-2] + "ves")
    elif word.endswith("f"):
        out.add(word[:-1] + "ves")
    return out


def words_of(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


@dataclass
class Vocabulary:
    """Object names → their class. `phrases` maps a name's words to its class, or to None for a phrase that
    names no object but must not be read as its words ("train track")."""

    phrases: dict[tuple[str, ...], str | None]
    singular: dict[str, str] = field(default_factory=dict)  # a plural form → the word

    def __post_init__(self):
        known = {w for p in self.phrases for w in p}
        for p in self.phrases:
            for form in plurals(p[-1]):
                if form not in known:  # a word that is itself a name is never read as another's plural
                    self.singular.setdefault(form, p[-1])
        self.longest = max(len(p) for p in self.phrases)

    @classmethod
    def from_lines(cls, lines: Iterable[list[str]], extra: dict[str, str | None] | None = None) -> Vocabulary:
        """From synonym lines (class first) and extra phrases (words → class or None)."""
        phrases: dict[tuple[str, ...], str | None] = {}
        for line in lines:
            for name in line:
                phrases.setdefault(tuple(words_of(name)), line[0])
        for name, cls_ in (extra or {}).items():
            phrases[tuple(words_of(name))] = cls_
        return cls({p: c for p, c in phrases.items() if p})

    def tokens(self, text: str) -> list[str]:
        return [self.singular.get(w, w) for w in words_of(text)]

    def mentions(self, text: str) -> list[tuple[int, str, str]]:
        """(index of its first token, its words, its class) of every object mention, in order."""
        toks = self.tokens(text)
        out, i = [], 0
        while i < len(toks):
            for n in range(min(self.longest, len(toks) - i), 0, -1):
                phrase = tuple(toks[i:i + n])
                if phrase in self.phrases:
                    if self.phrases[phrase] is not None:
                        out.append((i, " ".join(phrase), self.phrases[phrase]))
                    i += n
                    break
            else:
                i += 1
        return out


def chair_counts(mentions: list, objects: list, accepts: Callable[[Any, Any], bool]) -> dict[str, float]:
    """One caption's counts: its mentions, those no object of the image accepts (hallucinated), the image's
    objects and those some mention names (covered)."""
    hallucinated = sum(1 for m in mentions if not any(accepts(o, m) for o in objects))
    covered = sum(1 for o in objects if any(accepts(o, m) for m in mentions))
    return {"mentions": float(len(mentions)), "hallucinated": float(hallucinated), "objects": float(len(objects)),
            "covered": float(covered)}


def chair_figures(samples: list[dict[str, float]]) -> dict[str, float]:
    """CHAIR_s, CHAIR_i, recall and mentions per caption over captions' `chair_counts` (others left out)."""
    rows = [m for m in samples if "mentions" in m]
    n = len(rows)
    mentions = sum(m["mentions"] for m in rows)
    objects = sum(m["objects"] for m in rows)
    return {"chair_s": sum(1 for m in rows if m["hallucinated"]) / n if n else 0.0,
            "chair_i": sum(m["hallucinated"] for m in rows) / mentions if mentions else 0.0,
            "recall": sum(m["covered"] for m in rows) / objects if objects else 0.0,
            "mentions_per_caption": mentions / n if n else 0.0}


# ---- shapes ------------------------------------------------------------------------------------------------

SHAPE_LINES = (["circle", "disc", "disk"], ["square"], ["rectangle", "oblong"], ["triangle"], ["star"],
               ["ellipse", "oval"])
SHAPES = Vocabulary.from_lines(SHAPE_LINES)
COLOR_WORDS = {**{c: c for c in ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black",
                                 "white", "gray", "cyan")},
               "grey": "gray", "violet": "purple", "teal": "cyan", "turquoise": "cyan", "aqua": "cyan"}
_STOP = {"and", "or", "with"}


def color_class(word: str) -> str:
    """A ground-truth or caption colour word as its colour class (teal → cyan, grey → gray)."""
    return COLOR_WORDS.get(word, word)


def shape_mentions(caption: str) -> list[tuple[str | None, str]]:
    """(colour class or None, shape class) of every shape a caption mentions."""
    # Commas end a colour's reach; split them off as their own token before reading words.
    toks = SHAPES.tokens(caption.replace(",", " and "))
    out = []
    for i, _, shape in SHAPES.mentions(caption.replace(",", " and ")):
        color = None
        for back in (1, 2):
            if i - back < 0 or toks[i - back] in _STOP:
                break
            if toks[i - back] in COLOR_WORDS:
                color = COLOR_WORDS[toks[i - back]]
                break
        out.append((color, shape))
    return out


def shape_accepts(source: str) -> Callable[[tuple[str, str], tuple[str | None, str]], bool]:
    """Whether an object (colour, shape) of an image of `source` is what a mention (colour or None, shape) names."""
    also = ALSO_TRUE[source]

    def accepts(obj: tuple[str, str], mention: tuple[str | None, str]) -> bool:
        color, shape = mention
        return (shape == obj[1] or shape in also.get(obj[1], ())) and color in (None, color_class(obj[0]))

    return accepts

"""Numbers said in words, written as digits inside a text: "the number is forty-two" -> "the number is 42".

A transcriber writes a spoken number either way ("seven" or "7"), and a reply may copy either; comparing a text
with an option ("7") is fairer once both are in digits. Cardinals only (zero to the billions, "and" after
hundred or a scale, hyphens); words that cannot continue a number start the next one, so digits read one by
one stay apart ("four five six" -> "4 5 6"). word2number reads a whole string as one number and sums such
runs ("four five six" -> 26), so it is not used here.
"""

from __future__ import annotations

import re

UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine".split())}
TEENS = {w: i + 10 for i, w in enumerate(
    "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())}
TENS = {w: (i + 2) * 10 for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_WORD = "|".join(sorted([*UNITS, *TEENS, *TENS, "hundred", *SCALES], key=len, reverse=True))
# a run of number words joined by spaces or hyphens, "and" allowed inside it (not at its ends)
_RUN = re.compile(rf"\b(?:{_WORD})(?:(?:[\s-]+(?:and[\s]+)?)(?:{_WORD}))*\b", re.IGNORECASE)


def _numbers(words: list[str]) -> list[int]:
    """The numbers a run of number words says, left to right."""
    out: list[int] = []
    total = current = 0
    last = None  # what the previous word was: unit, teen, tens, hundred, scale (None: a new number)
    top = None  # the smallest scale used so far in this number: a larger one cannot follow it

    def close():
        nonlocal total, current, last, top
        if last is not None:
            out.append(total + current)
        total = current = 0
        last = top = None

    for w in words:
        if w in UNITS or w in TEENS:
            if not (last in (None, "hundred", "scale") or (last == "tens" and w in UNITS and w != "zero")):
                close()
            if w == "zero" and last is not None:
                close()
            current += UNITS.get(w, TEENS.get(w, 0))
            last = "unit" if w in UNITS else "teen"
        elif w in TENS:
            if last not in (None, "hundred", "scale"):
                close()
            current += TENS[w]
            last = "tens"
        elif w == "hundred":
            if last not in ("unit", "teen") or current % 100 == 0 or current >= 100:
                close()
                out.append(100)  # "hundred" alone, or after a tens word: said as it stands
                continue
            current *= 100
            last = "hundred"
        else:  # a scale
            scale = SCALES[w]
            if last in (None, "scale") or current == 0:
                close()
                out.append(scale)
                continue
            if top is not None and scale >= top:  # "one thousand two thousand": two numbers
                out.append(total)
                total = 0
            total += current * scale
            current, last, top = 0, "scale", scale
    close()
    return out


def digits(text: str) -> str:
    """`text` with each run of cardinal number words replaced by its numbers in digits."""
    def repl(m: re.Match) -> str:
        parts, run = [], []
        words = [w for w in re.split(r"[\s-]+", m.group(0).lower()) if w]
        for i, w in enumerate(words):
            if w != "and":
                run.append(w)
            elif words[i - 1] not in ("hundred", *SCALES):  # "two and three": two numbers and a word
                parts += [*map(str, _numbers(run)), "and"]
                run = []
        return " ".join([*parts, *map(str, _numbers(run))])

    return _RUN.sub(repl, text)


def in_words(n: int) -> str:
    """A whole number 0 <= n < 10**12 in words: 42 -> "forty two" (the inverse of `digits`)."""
    if not 0 <= n < 10**12:
        raise ValueError(f"in_words: {n} is outside 0 to 10**12")
    units, tens = list(UNITS), {v: w for w, v in TENS.items()}
    teens = {v: w for w, v in TEENS.items()}

    def small(k: int) -> list[str]:  # 1..999
        out = []
        if k >= 100:
            out += [units[k // 100], "hundred"]
            k %= 100
        if k >= 20:
            out.append(tens[k - k % 10])
            k %= 10
        if k >= 10:
            out.append(teens[k])
        elif k:
            out.append(units[k])
        return out

    if n == 0:
        return "zero"
    said = []
    for name, scale in sorted(SCALES.items(), key=lambda kv: -kv[1]):
        if n >= scale:
            said += [*small(n // scale), name]
            n %= scale
    return " ".join(said + small(n))


def spoken(text: str) -> str:
    """`text` with each whole number in digits said in words ("is 42" -> "is forty two"); the inverse of
    `digits`, for comparing what was heard with an option by sound ("free" is near "three", not "3")."""
    def repl(m: re.Match) -> str:
        n = int(m.group(0).replace(",", ""))
        return in_words(n) if n < 10**12 else m.group(0)

    return re.sub(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d.])|(?<![\d.,])\d+(?![\d,]|\.\d)", repl, text)

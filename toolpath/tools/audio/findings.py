"""The measured prosody said in a sentence: one clip's summary, and how several clips compare.

speech_features' JSON holds every figure, but a small model reading it answered a two-clip question from one
clip's numbers, or from the wrong key; these sentences lead its result, so what it measured is said first in
the words a question uses (faster, slower, higher, lower, rising, falling).
"""

from __future__ import annotations

# Differences smaller than these are within what the measures vary by on one voice: "about the same".
SAME_RATE = 0.05  # relative difference of two speaking rates
SAME_PITCH = 0.5  # semitones between two median pitches
RISE = 1.5  # semitones the voice ends above (rising) or below (falling) its median; see prosody.py
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def rate_of(result: dict) -> tuple[float | None, str]:
    """The clip's speaking rate and its unit: words per second from the transcript's times where there are
    some (the words themselves may be misheard, their count rarely), else syllables per second."""
    rate = result.get("rate") or {}
    if rate.get("words_per_second"):
        return rate["words_per_second"], "words per second"
    return rate.get("syllables_per_second"), "syllables per second"


def pitch_of(result: dict) -> float | None:
    return (result.get("pitch") or {}).get("median_hz")


def summary(result: dict) -> str:
    """One clip in a sentence: what it says, how fast, how high, how it ends."""
    parts = []
    if result.get("text"):
        parts.append(f'says "{result["text"]}"')
    rate, unit = rate_of(result)
    if rate:
        parts.append(f"{rate:g} {unit}")
    pitch = result.get("pitch") or {}
    if pitch.get("median_hz"):
        parts.append(f"median pitch {pitch['median_hz']:g} Hz")
        end = pitch.get("final_change_semitones")
        if end is not None:
            tune = "rising" if end > RISE else "falling" if end < -RISE else "level"
            parts.append(f"ends {tune} ({end:+g} semitones)")
    else:
        parts.append("no voiced speech found")
    if result.get("stressed_word"):
        parts.append(f'most stressed word "{result["stressed_word"]}"')
    return f"{result.get('audio', 'the clip')}: " + "; ".join(parts) + "."


def _name(result: dict, index: int, n: int) -> str:
    # the clip's place first: questions and their options say "the first clip", and a small model matched an
    # option by its opening words, so "audio_2 (the second clip) is faster" read to it as "the first clip"
    name = result.get("audio", f"clip {index + 1}")
    return f"the {ORDINALS[index]} clip ({name})" if n <= len(ORDINALS) else name


def _place(result: dict, index: int, n: int) -> str:
    """"the second clip", as questions and options say it; the clip's name where there are too many to count."""
    return f"the {ORDINALS[index]} clip" if n <= len(ORDINALS) else result.get("audio", f"clip {index + 1}")


def _names(results: list[dict], *indices: int) -> str:
    return " vs ".join(results[i].get("audio", f"clip {i + 1}") for i in indices)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _compare(results: list[dict], values: list[float | None], unit: str, more: str, less: str,
             same: str, close) -> str:
    """One measure across the clips: "The second clip is faster than the first clip (audio_2 vs audio_1: 3.1 vs
    2.2 words per second)", or the clips ranked
    when there are more than two."""
    known = [(v, i) for i, v in enumerate(values) if v]
    n = len(results)
    if len(known) < 2:
        return f"Cannot compare {unit}: measured on {len(known)} of the clips."
    if len(known) == 2:
        # the sentence in the options' own words, the names and figures after it: a small model copied the
        # sentence whole as its answer, and "the second clip (audio_2) is faster" quotes no option
        (a, i), (b, j) = known
        if close(a, b):
            return _sentence(f"{_place(results[i], i, n)} and {_place(results[j], j, n)} are {same} "
                             f"({_names(results, i, j)}: {a:g} vs {b:g} {unit}).")
        hi, lo = ((a, i), (b, j)) if a > b else ((b, j), (a, i))
        return _sentence(f"{_place(results[hi[1]], hi[1], n)} is {more} than {_place(results[lo[1]], lo[1], n)} "
                         f"({_names(results, hi[1], lo[1])}: {hi[0]:g} vs {lo[0]:g} {unit}).")
    ranked = sorted(known, reverse=True)
    return (f"From {more.split()[0]} to {less.split()[0]} ({unit}): "
            + ", ".join(f"{_name(results[i], i, n)} {v:g}" for v, i in ranked) + ".")


def comparison(results: list[dict]) -> str:
    """How the clips compare in speaking rate and in pitch, each with the figures it rests on."""
    import math

    rates = [rate_of(r) for r in results]
    units = {u for v, u in rates if v}
    unit = units.pop() if len(units) == 1 else "syllables per second"
    if unit == "syllables per second":  # one clip without word times: compare them all on the same measure
        rates = [((r.get("rate") or {}).get("syllables_per_second"), unit) for r in results]
    speed = _compare(results, [v for v, _ in rates], unit, "faster", "slower", "spoken at about the same rate",
                     lambda a, b: abs(a - b) <= SAME_RATE * max(a, b))
    pitch = _compare(results, [pitch_of(r) for r in results], "Hz median pitch", "higher-pitched",
                     "lower-pitched", "at about the same pitch",
                     lambda a, b: abs(12 * math.log2(a / b)) < SAME_PITCH)
    return f"{speed} {pitch}"

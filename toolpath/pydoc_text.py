"""English text every Python has: the topics of `pydoc_data.topics`, in sorted name order, and the one split of
them that calibration, training and perplexity all use.

The split is by topic (never inside one), so a held-out topic is unseen by calibration and training; it is
deterministic, so figures measured on it are comparable across runs and machines with the same Python.
"""

from __future__ import annotations

HELD_OUT_FROM = 0.8  # the first 80 % of the topics calibrate and train; the last 20 % are held out


def topics_text(start: float = 0.0, stop: float = 1.0) -> str:
    """The topics from share `start` to share `stop` of the sorted names (0.8 to 1.0: the last 20 %), joined by
    blank lines."""
    from pydoc_data.topics import topics

    keys = sorted(topics)
    return "\n\n".join(topics[k] for k in keys[int(start * len(keys)):int(stop * len(keys))])


def split_text(share: float = HELD_OUT_FROM) -> tuple[str, str]:
    """(calibration and training text, held-out text): the first `share` of the topics and the rest."""
    return topics_text(0.0, share), topics_text(share, 1.0)


def calibration_text() -> str:
    return topics_text(0.0, HELD_OUT_FROM)


def held_out_text() -> str:
    return topics_text(HELD_OUT_FROM, 1.0)

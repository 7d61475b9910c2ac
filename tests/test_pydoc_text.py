"""The English text every caller splits (toolpath/pydoc_text.py) is the same text, cut at the same topics, that each
caller cut for itself before: the published perplexity figures were measured on these exact parts."""

from __future__ import annotations

from pathlib import Path
from pydoc_data.topics import topics

import pytest

from toolpath import pydoc_text

ROOT = Path(__file__).resolve().parents[1]


def frozen(start: float, stop: float) -> str:
    """The cut as every caller wrote it: sorted topic names, keys[int(start * n):int(stop * n)], blank-line joined."""
    keys = sorted(topics)
    return "\n\n".join(topics[k] for k in keys[int(start * len(keys)):int(stop * len(keys))])


def test_kv_cache_calibration_and_held_out_text_are_unchanged():
    from toolpath.policies.kvcache import calibrate

    assert calibrate.calibration_text() == frozen(0.0, 0.8)
    assert pydoc_text.held_out_text() == frozen(0.8, 1.0)


def test_compression_split_is_unchanged():
    from toolpath.compress import text

    assert text.split_text() == (frozen(0.0, 0.8), frozen(0.8, 1.0))
    assert text.split_text(0.5) == (frozen(0.0, 0.5), frozen(0.5, 1.0))


@pytest.mark.parametrize("split, start, stop", [("train", 0.0, 0.7), ("calibration", 0.7, 0.8),
                                                 ("heldout", 0.8, 1.0)])
def test_tailoring_splits_are_unchanged(split, start, stop):
    from toolpath.compress.tailor_data import english_text

    assert english_text(split) == frozen(start, stop)


def test_the_parts_cover_every_topic_once():
    train, held = pydoc_text.split_text()
    assert train and held
    assert f"{train}\n\n{held}" == frozen(0.0, 1.0)


def test_no_module_cuts_the_topics_itself():
    """Only pydoc_text.py imports pydoc_data to split it. The metaembed pairs read every topic by section, and the
    engine benchmark reads the topics from the first, token by token (its published figures were measured so)."""
    allowed = {"toolpath/pydoc_text.py", "toolpath/train/metaembed_pairs.py", "benchmarks/engine.py"}
    files = [f for folder in ("toolpath", "benchmarks") for f in (ROOT / folder).rglob("*.py")]
    # read as text, not parsed: a benchmark's child-process code is held in a string
    importers = {str(f.relative_to(ROOT)) for f in files if "from pydoc_data" in f.read_text()}
    assert importers <= allowed, f"split the topics with toolpath.pydoc_text, not in {sorted(importers - allowed)}"

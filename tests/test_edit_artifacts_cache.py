"""The picture before an edit step is judged once, however many candidate tools a search tries on it."""

import numpy as np

import toolpath.tools.image.edit_artifacts as edit_artifacts


def test_the_picture_before_a_step_is_read_once_per_content(monkeypatch):
    calls = []

    def counting(image):
        calls.append(image.sum())
        return []

    monkeypatch.setattr(edit_artifacts, "find_regions", counting)
    before = np.full((64, 64, 3), 120, np.uint8)
    for shade in (10, 20, 30):  # three candidate steps from the same state
        after = before.copy()
        after[:16, :16] = shade
        edit_artifacts.new_artifacts(before, after, None)
    assert len(calls) == 1 + 3  # the picture before once, each result once
    edit_artifacts.new_artifacts(before.copy(), before + 1, None)  # same content, another array: still cached
    assert len(calls) == 5
    other = before.copy()
    other[0, 0] = 0
    edit_artifacts.new_artifacts(other, before, None)  # another picture is read anew
    assert len(calls) == 7

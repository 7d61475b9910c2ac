"""`transcribe` and `speech_features`: the speech tools, each reading a task's audio by name (audio_1, …)."""

from __future__ import annotations

from ..registry import ToolContext, ToolError, ToolResult, tool
from . import whisper
from .clips import Clip, episode_clip, resampled


def transcript(clip: Clip) -> dict:
    """{text, words: [{word, start, end}], language, seconds} of a decoded clip (Whisper tiny.en)."""
    return whisper.transcribe_samples(resampled(clip, whisper.RATE))


@tool(timeout=120.0, cost=2.0, quality=0.85, tags=("audio",))
def transcribe(audio: str, ctx: ToolContext) -> ToolResult:
    """Transcribe English speech: the text, each word with its start and end time in seconds, and the language.

    Args:
        audio: the audio's name, e.g. audio_1 (or its file name)
    """
    clip = episode_clip(ctx, audio, "transcribe")
    result = transcript(clip)
    return ToolResult(content=_json(result), data=result)


@tool(timeout=120.0, cost=1.0, quality=0.8, tags=("audio",))
def speech_features(audio: str, ctx: ToolContext, use_transcript: bool = True) -> ToolResult:
    """Measure how the speech sounds: pitch (median, range in Hz and semitones, contour, final rise or fall),
    speaking rate (syllables, and words per second from the transcript), energy, pauses (count, total, longest)
    and, with a transcript, its text, each word's pitch, loudness and length and the most stressed word.

    Args:
        audio: the audio's name, e.g. audio_1 (or its file name)
        use_transcript: time the words with the transcriber when its weights are installed
    """
    from .prosody import analyse

    clip = episode_clip(ctx, audio, "speech_features")
    heard = None
    if use_transcript and whisper.installed():
        try:
            heard = transcript(clip)
        except ToolError:
            heard = None  # refused or damaged weights: the prosody stands without word times
    result = {"audio": audio, **({"text": heard["text"]} if heard else {}),
              **analyse(clip, heard["words"] or None if heard else None)}
    return ToolResult(content=_json(result), data=result)


def _json(value: dict) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)

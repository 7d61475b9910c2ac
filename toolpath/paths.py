"""Where toolpath keeps what outlives a run: $TOOLPATH_HOME, by default ~/.toolpath.

The run store, built and converted models, caches and generated data sets all live under this one folder, so it
is resolved here and nowhere else. Nothing is created here: whoever writes under a folder makes it when it first
writes, so reading commands work on a home they cannot write.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """$TOOLPATH_HOME, else ~/.toolpath; a leading ~ is expanded, so the folder files are written to is the one
    an episode's reach check allows."""
    return Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath").expanduser()


def models_dir() -> Path:
    """Built, converted and exported models: one folder (or GGUF file) each."""
    return home() / "models"

"""A trained model's folder is written whole or not at all, so a reader (or a build killed half way) never
leaves a half-written model where `local:NAME` or a tool would load it."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replaced_folder(target: Path, name: str) -> Iterator[Path]:
    """Yields a temporary sibling path of `target` (not created: the caller writes it); when the block ends
    without an error it replaces `target`, and in every case nothing temporary is left behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        yield tmp
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)

"""An engine's export of a model folder, made once and kept under $TOOLPATH_HOME/models/<key>/: the key names the
source's content digest, the weights setting and the engine's version, so a changed source, another setting or an
upgraded engine each get their own export and never a stale one. The export is written into a hidden sibling
folder and renamed into place whole: a reader sees either nothing or a complete export, never half of one."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from ..fingerprint import files_digest

# Written last into an export: a folder without it is not an export (an interrupted copy, someone else's folder).
MARKER = "toolpath-export.json"
# What a model folder's behaviour depends on; anything else there (READMEs, images) does not change the export.
_SOURCE_SUFFIXES = (".safetensors", ".json", ".jinja", ".model", ".txt")


def source_digest(folder: Path) -> str:
    """sha256 over the names and bytes of the files a model folder's export is made from."""
    return files_digest(folder, _SOURCE_SUFFIXES)


def export_key(folder: Path, engine: str, version: str, weights: str, digest: str, options=()) -> str:
    """The export's folder name: the source, the engine and its version, the weights setting, the exporter's
    options (as a digest: changing one never reuses an export made without it) and the source's content."""
    made = hashlib.sha256("\0".join(options).encode()).hexdigest()[:8]
    return f"{folder.name[:48]}-{engine}-{version}-{weights}-{made}-{digest[:16]}"


def exported(models: Path, key: str, make: Callable[[Path], None]) -> Path:
    """The export named `key` under `models`, made by `make(empty temporary folder)` when it does not exist yet.
    Parallel makers may both work; the first rename wins and the other's copy is dropped."""
    target = models / key
    if (target / MARKER).is_file():
        return target
    models.mkdir(parents=True, exist_ok=True)
    tmp = models / f".{key}.{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        make(tmp)
        (tmp / MARKER).write_text(json.dumps({"key": key}))
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / MARKER).is_file():  # not a lost race: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target

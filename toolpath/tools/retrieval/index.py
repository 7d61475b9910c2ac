"""The retrieval index of a corpus: every vector of every item stored once, in a memory-mapped float16 .npy
under $TOOLPATH_HOME/search/, beside a manifest (which rows belong to which file, and the items' texts).

The folder is keyed like search's indexes (the files' paths, sizes and modification times, and here the
model's fingerprint), so a new process reuses it and any change to the corpus makes a new one; a secret known
only since it was written replaces it when it holds that secret (search/index_secrets.py). Building the
new one is incremental: rows of files that did not change are copied from the corpus's previous index (when
it was made by the same model); only new and changed files are read and encoded. The old folder is dropped
once the new one is in place (search.cache._publish).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from ...paths import home
from ...redact import redact_data, redactor
from ..corpus import Corpus
from ..search.cache import cache_dir, cached_index

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
VECTORS = "vectors.npy"

# Files this process encoded (not copied from a previous index), and index builds: tests read them to see
# what an update re-encoded; nothing else depends on them.
stats = {"builds": 0, "files_encoded": 0, "items_encoded": 0}


class VectorIndex:
    """Items (dicts: what a hit shows) and their vectors (items, *shape), memory-mapped read-only."""

    def __init__(self, folder: Path, items: list[dict], notes: list[str]):
        self.folder, self.items, self.notes = folder, items, notes
        self._vectors = self._first = None

    @property
    def vectors(self):
        """Mapped on first use: a fresh index is built in a temporary folder and read from where it is published."""
        import numpy as np

        if self._vectors is None and self.items:
            self._vectors = np.load(self.folder / VECTORS, mmap_mode="r")
        return self._vectors

    @property
    def first_vectors(self):
        """Each item's first vector in float32, read once (scoring.first_vectors): a one-vector budget's index."""
        from .scoring import first_vectors

        if self._first is None and self.vectors is not None:
            self._first = first_vectors(self.vectors)
        return self._first

    def nbytes_per_item(self) -> int:
        return 0 if self.vectors is None else int(self.vectors[0].nbytes)


def _previous(folder: Path, fingerprint: str) -> tuple[Path, dict] | None:
    """The newest other index of the same corpus made by the same model: the rows it can lend."""
    prefix = folder.name.rsplit("-", 1)[0] + "-"
    found = []
    for old in folder.parent.glob(prefix + "*"):
        if old == folder or old.name.endswith(".tmp") or not (old / MANIFEST).is_file():
            continue
        try:
            manifest = json.loads((old / MANIFEST).read_text())
        except (OSError, ValueError):
            continue
        if manifest.get("fingerprint") == fingerprint:
            found.append((old.stat().st_mtime_ns, old, manifest))
    if not found:
        return None
    _, old, manifest = max(found, key=lambda t: t[0])
    return old, manifest


def _build(tmp: Path, folder: Path, corpus: Corpus, fingerprint: str, shape: tuple[int, ...],
           encode_file: Callable[[Path], tuple[list[dict], object, list[str]]]) -> VectorIndex:
    """Write manifest + vectors into `tmp`: copied rows for unchanged files, encoded rows for the rest. Items
    and notes are redacted as they are written: copied ones again, since a secret may be newer than they are."""
    import numpy as np

    redact_text = redactor()
    prev = _previous(folder, fingerprint)
    old_rows = np.load(prev[0] / VECTORS, mmap_mode="r") if prev and prev[1]["items"] else None
    old_files = prev[1]["files"] if prev else {}
    parts: list[tuple[list[dict], object]] = []  # per file: items, and rows (an old slice or new vectors)
    entries, notes = {}, redact_data(list(corpus.skipped), redact_text)
    for path in corpus.files:
        st = path.stat()
        key = str(path)
        old = old_files.get(key)
        start, end = old["rows"] if old else (0, 0)
        unchanged = old and (old["size"], old["mtime_ns"]) == (st.st_size, st.st_mtime_ns)
        if unchanged and (old_rows is not None or end == start):
            items = redact_data(prev[1]["items"][start:end], redact_text)
            file_notes = redact_data(old.get("notes", []), redact_text)
            rows = old_rows[start:end] if end > start else np.zeros((0, *shape), np.float16)
            notes += file_notes
        else:
            items, rows, file_notes = encode_file(path)
            items, file_notes = redact_data(items, redact_text), redact_data(file_notes, redact_text)
            notes += file_notes
            stats["files_encoded"] += 1
            stats["items_encoded"] += len(items)
        entries[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "notes": file_notes}
        parts.append((items, rows))
    total = sum(len(items) for items, _ in parts)
    all_items: list[dict] = []
    if total:
        out = np.lib.format.open_memmap(tmp / VECTORS, mode="w+", dtype=np.float16, shape=(total, *shape))
        for (items, rows), key in zip(parts, entries):
            start = len(all_items)
            if items:
                out[start:start + len(items)] = np.asarray(rows, dtype=np.float16)
            entries[key]["rows"] = [start, start + len(items)]
            all_items += items
        out.flush()
        del out
    else:
        for key in entries:
            entries[key]["rows"] = [0, 0]
    (tmp / MANIFEST).write_text(json.dumps({"fingerprint": fingerprint, "shape": list(shape), "files": entries,
                                            "items": all_items, "notes": notes}, ensure_ascii=False))
    stats["builds"] += 1
    return VectorIndex(folder, all_items, notes)


def _load(folder: Path) -> VectorIndex:
    manifest = json.loads((folder / MANIFEST).read_text())
    return VectorIndex(folder, manifest["items"], manifest["notes"])


def vector_index(kind: str, corpus: Corpus, fingerprint: str, shape: tuple[int, ...],
                 encode_file: Callable[[Path], tuple[list[dict], object, list[str]]], params: dict | None = None,
                 what: str = "retrieve") -> VectorIndex:
    """The index of the corpus's files: from memory, else from disk, else built incrementally and cached.
    `encode_file(path)` -> (items, vectors (len(items), *shape), notes) for one file."""
    folder = cache_dir(kind, corpus, {"model": fingerprint, "shape": list(shape), **(params or {})})

    return cached_index(folder, MANIFEST, _load,
                        lambda tmp: _build(tmp, folder, corpus, fingerprint, shape, encode_file), what)


def index_home() -> Path:
    return home() / "search"

"""The on-disk index cache under $TOOLPATH_HOME/search/ and the environment settings it is keyed by.

The key names what the index is made from (the files, the parameters), never the secrets it was redacted
with: index_secrets decides, on each use, whether a secret known only since makes a cached index stale.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from ...paths import home
from ...redact import known_secrets
from ..corpus import Corpus
from . import index_secrets

# bump when the index layout, the parsing (redaction included) or the image descriptor changes: old caches go
_INDEX_VERSION = 5

# How many indexes this process built from the files (not loaded from the cache). Tests read it to see whether
# a search re-indexed; nothing else depends on it.
stats = {"text_builds": 0, "image_builds": 0}

_LOCK = threading.Lock()  # tool calls run in a thread pool: one index build at a time per process
_LOADED: dict[str, _Held] = {}  # cache folder (home + corpus + key) -> index already in memory


class _Held:
    """An index in memory, its folder's record as of the load or build (the salt tells whether the folder still
    holds that build), and the secrets it is known to be clear of."""

    def __init__(self, index: Any, record: index_secrets.Record, clear_of: frozenset[str]):
        self.index, self.record, self.clear_of = index, record, clear_of


def clear_memory_cache() -> None:
    """Forget indexes held in memory, as a new process would (the on-disk cache stays)."""
    with _LOCK:
        _LOADED.clear()


# The on-disk cache


def cache_dir(kind: str, corpus: Corpus, params: dict) -> Path:
    """The index's folder, named by a key that changes when any file is added, removed, resized, touched or
    skipped (the skipped files are the index's notes)."""
    entries = []
    for f in corpus.files:
        st = f.stat()
        entries.append([str(f), st.st_size, st.st_mtime_ns])
    blob = json.dumps([_INDEX_VERSION, kind, str(corpus.root), params, entries, corpus.skipped])
    key = hashlib.sha256(blob.encode()).hexdigest()[:20]
    root_tag = hashlib.sha256(str(corpus.root).encode()).hexdigest()[:10]
    return home() / "search" / f"{kind}-{root_tag}-{key}"


def _publish(tmp: Path, final: Path) -> None:
    """Move a freshly built index into place atomically, then drop older indexes of the same corpus."""
    try:
        os.replace(tmp, final)
    except OSError:  # another process published the same key first; its copy is as good as ours
        shutil.rmtree(tmp, ignore_errors=True)
    prefix = final.name.rsplit("-", 1)[0] + "-"
    for old in final.parent.glob(prefix + "*"):
        if old != final and not old.name.endswith(".tmp"):
            shutil.rmtree(old, ignore_errors=True)


def _new_tmp_dir(final: Path) -> Path:
    """A folder to build `final` in, named FINAL.PID.RANDOM.tmp so a later run can tell whether its builder lives."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{final.name}.{os.getpid()}.", suffix=".tmp", dir=final.parent))


def _builder_alive(tmp: Path) -> bool:
    """Whether the process that named this temporary folder may still be writing it. Our own are never in
    progress here (the caller holds _LOCK, and every build of this process does); one without a pid in its
    name comes from an older toolpath's run."""
    parts = tmp.name.split(".")
    if len(parts) != 4 or not parts[1].isdigit() or int(parts[1]) == os.getpid():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, under another user
        return True
    return True


def remove_stale_builds(folder: Path) -> None:
    """Remove the temporary folders that builds killed mid-way (kill -9, the OOM killer) left in `folder`."""
    for tmp in folder.glob("*.tmp"):
        if not _builder_alive(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def _discard(folder: Path) -> None:
    """Remove a published index: moved aside first, so no reader finds it half deleted."""
    trash = _new_tmp_dir(folder)
    try:
        os.replace(folder, trash)
    except OSError:  # gone already: another process discarded or replaced it
        pass
    shutil.rmtree(trash, ignore_errors=True)


def _clear_of_new_secrets(folder: Path, record: index_secrets.Record, known: frozenset[str]) -> bool:
    """Whether the index that `record` describes holds none of the known secrets it was not redacted with, those
    found absent being recorded. The folder must still hold that build once its files are read (every build has
    its own salt): one that another process replaced meanwhile counts as not clear."""
    new = record.unchecked(known)
    found = bool(new) and index_secrets.holds_any(folder, new)
    if index_secrets.read_record(folder).salt != record.salt:
        raise ValueError("replaced by another process while it was read")
    if found:
        return False
    if new:
        index_secrets.add_checked(folder, record, new)
    return True


def cached_index(folder: Path, marker: str, load, build, what: str):
    """The index in `folder`: from memory, else loaded from disk (when `marker` is there), else built in a
    temporary folder by `build(tmp)` and published atomically. A damaged cache is rebuilt, not fatal; so is one
    that holds in clear a secret known only since it was written (it is removed, not kept beside)."""
    import logging

    log = logging.getLogger(__name__)
    with _LOCK:
        known = known_secrets()
        held = _LOADED.pop(str(folder), None)
        if held is not None and known <= held.clear_of:
            _LOADED[str(folder)] = held
            return held.index
        index = record = None
        if held is not None or (folder / marker).is_file():
            try:
                record = index_secrets.read_record(folder)
                if held is not None and record.salt == held.record.salt:
                    index, record = held.index, held.record  # the folder still holds what memory holds
                else:
                    index = load(folder)
                if not _clear_of_new_secrets(folder, record, known):
                    log.info("%s: rebuilding %s, written before a secret it holds was known", what, folder)
                    _discard(folder)
                    index = None
            except (OSError, ValueError, KeyError) as err:
                if held is None:
                    log.warning("%s: rebuilding unreadable index %s: %s", what, folder, err)
                index = None
        if index is None:
            remove_stale_builds(folder.parent)
            tmp = _new_tmp_dir(folder)
            try:
                index = build(tmp)
                record = index_secrets.write_record(tmp, known)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            _publish(tmp, folder)
        _LOADED[str(folder)] = _Held(index, record, known)
        return index

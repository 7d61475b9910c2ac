"""Which secrets a cached index was redacted with, and whether a secret known only since appears in it in clear.

Processes differ in the secrets they know (another API key in one's environment, a value a spec registered at
run time), so an index cannot be keyed by them: processes with different sets would each rebuild the index and
delete the other's. The key ignores secrets instead, and the index keeps beside it a record of the secrets it
was redacted with, as salted hashes (a secret is recognised without being written down; the salt is the
index's own, so equal secrets do not hash alike across indexes). A process that knows a secret outside that
record looks for it in the index's cached text: where it is absent the index is as a rebuild would make it, so
it is reused and the secret recorded as checked; where it appears the index is stale.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ...redact import quoted_forms

RECORD = "secrets.json"
# Numeric arrays (vectors, BM25 scores): no text in them to hold a secret.
_ARRAY_SUFFIXES = (".npy", ".npz")


class Record:
    """An index's salt (it also tells one build of a folder from another) and its secrets' salted hashes."""

    def __init__(self, salt: str, hashes: set[str]):
        self.salt, self.hashes = salt, hashes

    def digest(self, secret: str) -> str:
        return hashlib.sha256((self.salt + secret).encode()).hexdigest()

    def unchecked(self, secrets: Iterable[str]) -> list[str]:
        """The secrets this index was neither redacted with nor checked for."""
        return [s for s in secrets if self.digest(s) not in self.hashes]


def write_record(folder: Path, secrets: Iterable[str]) -> Record:
    """A new record (fresh salt) for the index just built in `folder` with `secrets` known."""
    record = Record(os.urandom(16).hex(), set())
    record.hashes = {record.digest(s) for s in secrets}
    _save(folder, record)
    return record


def read_record(folder: Path) -> Record:
    """The record beside an index; OSError, ValueError or KeyError when it is missing or damaged."""
    data = json.loads((folder / RECORD).read_text())
    if not isinstance(data["salt"], str) or not isinstance(data["hashes"], list):
        raise ValueError(f"{folder / RECORD}: not a secrets record")
    return Record(data["salt"], set(data["hashes"]))


def add_checked(folder: Path, record: Record, secrets: Iterable[str]) -> None:
    """Record secrets found absent from the index, so no process searches for them again. Best effort: a
    folder that cannot be written (read-only, removed meanwhile) only means the next process searches again."""
    record.hashes |= {record.digest(s) for s in secrets}
    try:
        current = read_record(folder)
        if current.salt != record.salt:  # the folder holds another build now: the check was not of it
            return
        record.hashes |= current.hashes  # another process's checks since we read it
        _save(folder, record)
    except (OSError, ValueError, KeyError):
        pass


def _save(folder: Path, record: Record) -> None:
    """Write the record whole or not at all: a reader never sees half of it."""
    fd, tmp = tempfile.mkstemp(prefix=RECORD + ".", suffix=".part", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"salt": record.salt, "hashes": sorted(record.hashes)}, f)
        os.replace(tmp, folder / RECORD)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def holds_any(folder: Path, secrets: list[str]) -> bool:
    """Whether any of `secrets` appears, in any form redaction knows (as written, JSON-escaped,
    percent-encoded), in any text the index in `folder` caches: every string of its JSON files (passages,
    titles, urls, notes, manifest items, the BM25 vocabulary; keys too) and any other non-array file."""
    if not secrets:
        return False
    forms = set().union(*(quoted_forms(s) for s in secrets))
    text = "\0".join(_cached_texts(folder))
    return any(form in text for form in forms)


def _cached_texts(folder: Path) -> Iterator[str]:
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name.startswith(RECORD) or path.suffix in _ARRAY_SUFFIXES:
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".json":
            yield from _strings(json.loads(raw))
        else:
            yield raw


def _strings(value: Any) -> Iterator[str]:
    """Every string inside nested JSON values, dict keys included."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            stack += v.keys()
            stack += v.values()
        elif isinstance(v, list):
            stack += v

"""What names a model in a cache: one digest of a model's files and one fingerprint of a loaded model.

Every cache derived from a model (an engine's export, a GGUF file's conversion, a kv-cache calibration profile,
the inherent image bias of a decoding method, the tailor method's fine-tuned candidates) is keyed by one of these,
so a changed model never meets a stale entry and two names of one model share it:

    file_digest(path)              sha256 of a file's bytes
    files_digest(folder, suffixes) sha256 of the names and bytes of a folder's files with those suffixes
    model_fingerprint(model)       a loaded model: its class, its config (not the path it came from) and a sample
                                   of every tensor it holds
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Values read from each tensor of a loaded model: enough that a fine-tune, another seed or other weights setting
# (bf16, int8) differs, while hashing stays cheap for any model size (the full embedding of a 1.5B model is 1 GB).
SAMPLE = 64
_BLOCK = 1 << 20


def _update_with_file(h, path: Path) -> None:
    with path.open("rb") as data:
        for block in iter(lambda: data.read(_BLOCK), b""):
            h.update(block)


def file_digest(path: Path) -> str:
    """sha256 (hex) of the file's bytes, read in blocks."""
    h = hashlib.sha256()
    _update_with_file(h, Path(path))
    return h.hexdigest()


def files_digest(folder: Path, suffixes: tuple[str, ...]) -> str:
    """sha256 (hex) over the sorted names and bytes of the folder's files ending in one of `suffixes` (what a
    model's behaviour depends on; READMEs and pictures beside it change nothing)."""
    h = hashlib.sha256()
    for f in sorted(p for p in Path(folder).iterdir() if p.is_file() and p.name.endswith(suffixes)):
        h.update(f.name.encode() + b"\0")
        _update_with_file(h, f)
        h.update(b"\0")
    return h.hexdigest()


def model_fingerprint(model: Any, parts: Iterable[Any] | None = None) -> str:
    """20 hex digits naming a loaded transformers model: its class, its whole config, and the name, dtype, shape
    and first SAMPLE values of every tensor of `parts` (modules of the model; default the whole model)."""
    import torch

    h = hashlib.sha256(type(model).__name__.encode())
    config = _without_path(json.loads(model.config.to_json_string(use_diff=False)))
    h.update(json.dumps(config, sort_keys=True).encode())
    with torch.no_grad():
        for part in (model,) if parts is None else parts:
            for name, t in part.state_dict().items():
                h.update(f"{name}:{t.dtype}:{tuple(t.shape)}\0".encode())
                h.update(t.detach().reshape(-1)[:SAMPLE].float().cpu().numpy().tobytes())
    return h.hexdigest()[:20]


def _without_path(config: Any) -> Any:
    """The config without where it was read from (`_name_or_path`, at any depth): one model under two names or
    folders is one model."""
    if isinstance(config, dict):
        return {k: _without_path(v) for k, v in config.items() if k != "_name_or_path"}
    return config

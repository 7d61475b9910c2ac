"""Model files are checked before a loader reads them: a model folder may come from anyone, like a spec.

- Pickle weights (`pytorch_model.bin`, `.pt`, `.pth`, `.ckpt`) are never read: unpickling runs whatever code
  the file names, and torch's restricted unpickler is a deny-list of one library's making. A folder holds
  safetensors weights, or it is refused with the way to convert it.
- A safetensors file is a little-endian u64 header length, a JSON header naming each tensor's dtype, shape and
  byte range, then the data. Its header is read here first (at most MAX_HEADER_BYTES, as the safetensors
  library's own bound) and every range must lie inside the file and match its dtype and shape, so a header
  that claims more bytes than the file has is one clear error naming the file, before anything is allocated.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path

MAX_HEADER_BYTES = 100_000_000
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
               "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8}
# sub-byte dtypes a newer safetensors names: their sizes are checked against the file, not against the shape
SUB_BYTE = {"F4", "F6_E2M3", "F6_E3M2"}


class ModelFileError(ValueError):
    """A model file that must not or cannot be read; the message names the file."""


def _regular(path: Path, what: str) -> os.stat_result:
    try:
        st = path.stat()
    except OSError as err:
        raise ModelFileError(f"{what} {path}: cannot read it: {err.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelFileError(f"{what} {path}: not a regular file")
    return st


def check_safetensors(path: str | Path, what: str = "weights file") -> dict:
    """The tensors' entries of a safetensors file's header ({name: {dtype, shape, data_offsets}}), after
    checking that the header is well formed and every tensor lies inside the file; ModelFileError otherwise."""
    path = Path(path)
    size = _regular(path, what).st_size
    bad = f"{what} {path}: not a safetensors file"
    try:
        with path.open("rb") as f:
            head = f.read(8)
            length = struct.unpack("<Q", head)[0] if len(head) == 8 else None
            raw = f.read(length) if length is not None and length <= min(MAX_HEADER_BYTES, size - 8) else None
    except OSError as err:
        raise ModelFileError(f"{what} {path}: cannot read it: {err.strerror}") from None
    if length is None:
        raise ModelFileError(f"{bad} (shorter than its 8-byte header length)")
    if raw is None:
        raise ModelFileError(f"{bad}: its header claims {length:,} bytes; the file has {size:,} bytes, and a "
                             f"header is at most {MAX_HEADER_BYTES:,}")
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
        raise ModelFileError(f"{bad}: its header is not a JSON object") from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{bad}: its header is not a JSON object")
    data = size - 8 - length
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    for name, entry in tensors.items():
        _check_entry(path, what, name, entry, data)
    return tensors


def _check_entry(path: Path, what: str, name: str, entry, data: int) -> None:
    where = f"{what} {path}: tensor {name[:200]!r}"
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        raise ModelFileError(f"{where}: expected dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in DTYPE_BYTES and dtype not in SUB_BYTE:
        raise ModelFileError(f"{where}: unknown dtype {str(dtype)[:40]!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ModelFileError(f"{where}: shape must be a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]):
        raise ModelFileError(f"{where}: data_offsets must be [begin, end]")
    if offsets[1] > data:
        raise ModelFileError(f"{where}: its bytes {offsets[0]:,}..{offsets[1]:,} lie beyond the file's "
                             f"{data:,} bytes of data")
    if dtype in DTYPE_BYTES:
        count = 1
        for d in shape:
            count *= d
        if count * DTYPE_BYTES[dtype] != offsets[1] - offsets[0]:
            raise ModelFileError(f"{where}: shape {shape[:8]} of {dtype} needs {count * DTYPE_BYTES[dtype]:,} "
                                 f"bytes, its range has {offsets[1] - offsets[0]:,}")


def check_model_folder(folder: str | Path) -> None:
    """A model folder's weights: safetensors files, each checked; ModelFileError naming the file for pickle
    weights (never unpickled) or a malformed safetensors file."""
    folder = Path(folder)
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        pickled = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES and p.is_file())
        if pickled:
            raise ModelFileError(f"model folder {folder}: its weights ({', '.join(pickled[:3])}) are pickle files, "
                                 "which toolpath does not load (unpickling runs code the file names); convert "
                                 "them to safetensors where you trust them, e.g. save_pretrained(..., "
                                 "safe_serialization=True)")
    for path in weights:
        check_safetensors(path)

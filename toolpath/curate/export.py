"""--export FILE.jsonl: the kept items as a fine-tuning file, written whole or not at all.

Items with a conversation (runs, JSONL lines with `messages`) are written in the chat form that OpenAI's
fine-tuning and TRL's SFTTrainer read: {"messages": [...]} with assistant tool calls as {id, type: function,
function: {name, arguments}} (arguments as JSON text, which both accept) and each tool result as a `tool` message
with its tool_call_id. Plain texts are written as {"text": ...}, the form SFTTrainer reads for language modelling.
A file of both would have no one schema, so a mixed selection is written as texts.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .items import CurateError, Item


def rows(items: list[Item]) -> list[dict]:
    if items and all(item.messages for item in items):
        return [{"messages": item.messages} for item in items]
    return [{"text": item.text} for item in items]


def write_jsonl(items: list[Item], path: str | Path) -> int:
    """Write the rows to `path` (a temporary file renamed into place, so a failure leaves the old file, if any);
    returns how many. CurateError naming the path when it cannot be written."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise CurateError(f"--export {path}: a folder; name the .jsonl file to write")
    if not path.parent.is_dir():
        raise CurateError(f"--export {path}: no folder {path.parent}")
    data = rows(items)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                for row in data:
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as err:
        raise CurateError(f"--export {path}: cannot write it: {err.strerror or err}") from None
    return len(data)

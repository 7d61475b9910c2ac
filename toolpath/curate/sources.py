"""SOURCE, read into items: `runs:FILTER` (stored runs), a folder of text files (one item each), or a JSONL file
(one item per line: a JSON string, or an object with `text`, or with `messages` in the chat form)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .items import CurateError, Item

TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text")
LINE_FORM = 'a JSON string, or an object with "text" (a string) or "messages" (a list of chat messages)'
USAGE = "expected runs:FILTER, a folder of text files or a .jsonl file"


@dataclass
class Items:
    items: list[Item]
    skipped: list[str] = field(default_factory=list)  # "where: why" for each file not read


def read_source(source: str, home: str | Path | None = None) -> Items:
    if source.startswith("runs:"):
        from .runs_source import run_items

        return Items(run_items(source.removeprefix("runs:"), home))
    path = Path(source).expanduser()
    if path.is_dir():
        return _folder(path)
    if path.is_file() and path.suffix.lower() in (".jsonl", ".json"):
        return _json_lines(path)
    if path.exists():
        raise CurateError(f"SOURCE {source}: not a folder or a .jsonl file ({USAGE})")
    raise CurateError(f"SOURCE {source}: no such file or folder ({USAGE})")


def _folder(folder: Path) -> Items:
    """Each text file under the folder (its links that leave it, non-regular and oversized files skipped and
    named: tools/corpus.py's walk, the one search and retrieve use)."""
    from ..tools.corpus import Unreadable, read_bytes, walk
    from ..tools.registry import ToolError

    try:
        corpus = walk(folder, TEXT_SUFFIXES)
    except ToolError as err:
        raise CurateError(str(err)) from None
    out = Items([], list(corpus.skipped))
    for file in corpus.files:
        shown = str(folder / file.relative_to(corpus.root))
        try:
            text = read_bytes(file).decode("utf-8")
        except (OSError, Unreadable) as err:
            out.skipped.append(f"{shown}: cannot read ({err})")
            continue
        except UnicodeDecodeError:
            out.skipped.append(f"{shown}: not UTF-8 text")
            continue
        if not text.strip():
            out.skipped.append(f"{shown}: empty")
            continue
        out.items.append(Item(shown, text))
    if not out.items:
        why = f"; skipped: {'; '.join(out.skipped[:5])}" if out.skipped else ""
        raise CurateError(f"SOURCE {folder}: no text files ({', '.join(TEXT_SUFFIXES)}) in it{why}")
    return out


def _json_lines(path: Path) -> Items:
    from ..evals.benchmarks import BenchmarkDataError, read_json_lines
    from .runs_source import run_text

    try:
        rows = read_json_lines(path, "curation source", hint=f"each line is {LINE_FORM}")
    except BenchmarkDataError as err:
        raise CurateError(str(err)) from None
    out = Items([])
    for n, value in rows:
        where = f"{path}:{n}"
        text = value if isinstance(value, str) else value.get("text") if isinstance(value, dict) else None
        if isinstance(text, str) and not text.strip():
            out.skipped.append(f"{where}: empty text")
        elif isinstance(value, str):
            out.items.append(Item(where, value))
        elif isinstance(value, dict) and isinstance(value.get("text"), str):
            out.items.append(Item(where, value["text"]))
        elif isinstance(value, dict) and _chat(value.get("messages")):
            out.items.append(Item(where, run_text(value["messages"]), value["messages"]))
        else:
            raise CurateError(f"{where}: expected {LINE_FORM}")
    if not out.items:
        raise CurateError(f"SOURCE {path}: no text in it" + (f" ({out.skipped[0]})" if out.skipped else ""))
    return out


def _chat(messages) -> bool:
    return (isinstance(messages, list) and bool(messages)
            and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                    and isinstance(m.get("content", ""), (str, type(None)))
                    and isinstance(m.get("tool_calls") or [], list) for m in messages))

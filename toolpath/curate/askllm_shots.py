"""Worked examples that AskLLM's prompt can start with: the question answered for a few texts before the one
scored, as earlier turns of the chat. Small instruction-tuned models (the local Qwen coders) do not answer the
paper's zero-shot question: they rank keyword spam and navigation text above prose. Shown how the question is
answered, they follow the paper's criterion (well-formatted text carrying knowledge of the world).

The built-in examples are written for this purpose, on subjects and in wordings that no benchmark here draws from:
three paragraphs of prose (science, history, a practical explanation) answered yes, and three kinds of web debris
answered no (a search-engine keyword page, a site's page furniture, text garbled by a bad extraction). A user's
own examples come from a JSONL file, one {"text": ..., "answer": "yes" | "no"} per line.
"""

from __future__ import annotations

import json
from pathlib import Path

from .items import CurateError

BUILTIN: tuple[tuple[str, str], ...] = (
    ("Glaciers move because ice under its own weight deforms slowly, like a very stiff fluid, and because meltwater "
     "at the base lets the whole mass slide over the rock beneath it. As a glacier flows it plucks loose blocks "
     "from its bed and drags them along, grinding the valley floor into the broad U shape that distinguishes "
     "glaciated valleys from the V-shaped valleys cut by rivers.", "yes"),
    ("garden hose reel | garden hose reel wall mount | hose reel cart lowest prices | hose reel near me open now "
     "| top 10 hose reels 2021 | hose reel reviews | hose reel sale | click for hose reel deals | hose reel hose "
     "reel hose reel", "no"),
    ("The printing press that Johannes Gutenberg built around 1450 combined movable metal type, an oil-based ink "
     "and a screw press adapted from wine making. Books that had taken a scribe months could be produced in "
     "hundreds of copies, and within fifty years presses were working in more than two hundred European towns.",
     "yes"),
    ("Menu Search Account Wishlist (0) Basket (0)\nPrevious article Next article\nRelated posts\nLeave a reply "
     "Cancel reply\nYour email address will not be published. Required fields are marked *\nRecent Comments "
     "Archives Categories Meta Log in Entries feed Comments feed", "no"),
    ("To keep bread from going stale quickly, store it at room temperature in a paper or cloth bag rather than "
     "in the refrigerator. Staling is mostly starch recrystallising, not drying out, and it happens fastest at "
     "temperatures just above freezing; bread that will not be eaten within a few days keeps best frozen.", "yes"),
    ("the of Figure 3 shows ( ) were and 0.0 0.0 0.0 tion re- sults in the ta ble be low pp. 23-24 ibid ; ; "
     "con- tinued on page see also fig fig fig [ 12 ] [ 13 ] and the and the", "no"),
)


def read_shots(value: str | None) -> tuple[tuple[str, str], ...]:
    """--askllm-shots: `builtin` (the default), `none` (the paper's zero-shot prompt) or a JSONL file of
    {"text", "answer"} lines. CurateError naming the file and line of a bad one."""
    if value in (None, "builtin"):
        return BUILTIN
    if value == "none":
        return ()
    path = Path(value)
    if not path.is_file():
        raise CurateError(f"--askllm-shots {value}: expected builtin, none or a JSONL file of "
                          '{"text": ..., "answer": "yes" | "no"} lines; no such file')
    shots = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        where = f"--askllm-shots {value}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise CurateError(f"{where}: not JSON ({err.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str) or not row["text"].strip():
            raise CurateError(f'{where}: expected {{"text": ..., "answer": "yes" | "no"}} with a non-empty text')
        answer = str(row.get("answer", "")).strip().lower()
        if answer not in ("yes", "no"):
            raise CurateError(f"{where}: answer must be yes or no, got {row.get('answer')!r}")
        shots.append((row["text"], answer))
    if not shots:
        raise CurateError(f"--askllm-shots {value}: no examples in the file")
    return tuple(shots)

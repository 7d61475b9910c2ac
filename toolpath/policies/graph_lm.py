"""A graph-language model as a policy (`local:tiny-molm`): it reads the task's molecules as graphs and answers.

An episode lists the task's molecules in its first user message as "graph_1: SMILES" lines under a
"Molecules (...):" header (spec_molecules.listed). This policy takes each listed SMILES back out of the text,
puts the molecule in the prompt as its graph tokens (named, when there are several) and asks the rest of the
text, the way the model was trained: a graph, then a question. It calls no tools: its reply is the answer.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from ..spec_molecules import LISTED, molecules_in_text
from ..state import Message
from .base import PolicyError, Response

# The header the episode writes above the listed molecules; the model was trained on the question alone.
_HEADER = re.compile(r"^Molecules\b.*:[ \t]*$", re.M)


def prompt_content(text: str) -> list[dict]:
    """The user turn as the graph-LM reads it: the listed molecules as graph items (each after its name when
    there are several), then the text without the listing."""
    molecules = molecules_in_text(text)
    question = _HEADER.sub("", LISTED.sub("", text)).strip()
    items: list[dict] = []
    for name, smiles in molecules.items():
        if len(molecules) > 1:
            items.append({"type": "text", "text": f"{name}:"})
        items.append({"type": "graph", "smiles": smiles, "name": name})
    return items + [{"type": "text", "text": question}]


class GraphLMPolicy:
    observes: tuple[str, ...] = ()

    def __init__(self, model, name: str):
        self.model, self.name = model, name

    @classmethod
    def from_folder(cls, folder: Path, name: str) -> GraphLMPolicy:
        from .molm.model import load

        try:
            return cls(load(folder), name)
        except (ValueError, OSError) as err:
            raise PolicyError(f"{name}: {err}") from None

    def respond(self, messages: list[Message], tools: list[dict], **generation: Any) -> Response:
        task = next((m for m in messages if m.role == "user"), None)
        if task is None:
            raise PolicyError(f"{self.name}: the conversation has no user message to answer")
        started = time.perf_counter()
        try:
            text, n_in, n_out = self.model.reply(prompt_content(task.content),
                                                 int(generation.get("max_new_tokens") or 32))
        except ValueError as err:  # a listed SMILES RDKit cannot read: said with the molecule's name
            raise PolicyError(f"{self.name}: {err}") from None
        return Response(text=text, answer=text, tokens_in=n_in, tokens_out=n_out, raw=text,
                        latency_s=time.perf_counter() - started)

"""Molecule questions whose answers RDKit computes, asked about held-out molecules (`toolpath eval molqa`).

The molecules are the held-out tenth of RDKit's bundled NCI set, split by molecule exactly as
`toolpath models build tiny-molm` splits it with its default seed 0 (so its model never trained on them); each is
a task with the molecule as `inputs.graphs` and one question, drawn as the build's evaluation draws them (group
questions with yes and no equally often). Categories: yes_no and numeric; a reply is graded by the question's
own scorer (integer for counts, mra for measured quantities, short_answer for yes/no). The default model is
`local:tiny-molm`; any model can be asked, a text model reading the molecule's SMILES from the task text.

`--data PATH` asks MoleculeQA's four-option questions instead (molqa_moleculeqa reads the files): the molecule
as `inputs.graphs`, the question and its options as the instruction, graded by the option letter (`choice`),
categories MoleculeQA's topics.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

from ...spec import TaskSpec
from .. import scorers
from . import Benchmark, Record, Score, pick
from . import molqa_data as qa

HELDOUT = 0.1  # the build's held-out share (train/tiny_molm.py's BuildConfig.heldout)
SPLIT_SEED = 0  # the build's default seed: the molecules `local:tiny-molm` built with seed 0 never saw
PER_MOLECULE = 2
N_RECORDS = 200


@functools.cache
def split() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(training, held-out) canonical SMILES of the build's default split (read once: it parses 5,000)."""
    train, heldout = qa.split(qa.nci_smiles(), HELDOUT, SPLIT_SEED)
    return tuple(train), tuple(heldout)


class MolQA(Benchmark):
    name = "molqa"
    description = "RDKit-answered property questions about held-out NCI molecules (numeric and yes/no)"
    categories = ("yes_no", "numeric")
    model = "local:tiny-molm"

    def __init__(self, data: str | Path | None = None):
        self.data = Path(data).expanduser() if data else None
        if self.data is not None:
            from .molqa_moleculeqa import TOPICS

            self.categories = (*TOPICS, "moleculeqa")

    def records(self, limit: int | None = None, seed: int = 0) -> Iterable[Record]:
        if self.data is not None:
            from .molqa_moleculeqa import read_records

            return pick(read_records(self.data), limit, seed)
        return self._generated(limit, seed)

    def _generated(self, limit: int | None, seed: int) -> Iterable[Record]:
        heldout = list(split()[1])
        n = N_RECORDS if limit is None else limit
        molecules = heldout[:(n + PER_MOLECULE - 1) // PER_MOLECULE]
        for i, (smiles, q) in enumerate(qa.heldout_questions(molecules, PER_MOLECULE, seed)[:n]):
            yield Record(id=f"molqa-{seed}-{i:04d}", category="yes_no" if q.scorer == "short_answer" else "numeric",
                         data={"smiles": smiles, "kind": q.kind, "question": q.text, "answer": q.answer,
                               "scorer": q.scorer})

    def to_task(self, record: Record, model: str | None = None) -> TaskSpec:
        d = record.data
        # the question alone, as the graph-LM was trained; the scorers read a value out of a longer reply
        instruction, evaluator = d["question"], {"name": d["scorer"], "expected": d["answer"]}
        if "choices" in d:  # MoleculeQA: the options follow the question, the reply is graded by its letter
            options = "\n".join(f"{letter}. {text}" for letter, text in zip("ABCD", d["choices"]))
            instruction = f"{instruction}\n{options}\nAnswer with the option's letter."
            evaluator["options"] = {"scoring": self.scoring, "choices": d["choices"]}
        spec = {"id": record.id, "instruction": instruction,
                "inputs": {"graphs": [d["smiles"]]}, "tools": ["final_answer"], "limits": {"max_steps": 2},
                "evaluator": evaluator,
                "metadata": {"benchmark": self.name, "category": record.category, **d}, "model": model or self.model}
        return TaskSpec.model_validate(spec)

    def score(self, record: Record, answer: str | None) -> Score:
        d = record.data
        options = {"scoring": self.scoring, "choices": d["choices"]} if "choices" in d else {}
        value = getattr(scorers, d["scorer"])(answer, d["answer"], options)
        return Score(value, {"correct": value}, f"{d['kind']}: expected {d['answer']}, got {answer!r}")

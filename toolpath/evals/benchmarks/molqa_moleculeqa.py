"""Reading MoleculeQA's released files (`toolpath eval molqa --data PATH`): four-option questions about molecules
(topics Structure, Source, Property, Usage), each a prompt holding the molecule and its question, and the right
option's letter.

The release writes each split as a tab-separated file with the header `CID  Question  Answer` (MolT5's style), a
topic per folder (`Structure/test.txt`, ...); its BioT5-style copy is a JSON object whose `Instances` hold `input`
(the same prompt) and `output` (a list holding the letter). The prompt's lines are:

    Molecule SMILES: <smiles>           (the BioT5 copy writes `Molecule SELFIES: <bom>...<eom>` instead)
    Question about this molecule: <question>
    Option A: <text>   ... Option D: <text>

A folder reads every `*/test.txt` under it (each topic's test split), or its one file of either form. Every
problem (a missing field, a molecule RDKit cannot read, a SELFIES prompt, a bad letter) is a BenchmarkDataError
naming the file and the row.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from ...policies.molm import graphs as mg
from . import BenchmarkDataError, Record

LETTERS = ("A", "B", "C", "D")
TOPICS = ("Structure", "Source", "Property", "Usage")
_SMILES = re.compile(r"^Molecule SMILES:\s*(\S+)\s*$", re.MULTILINE)
_QUESTION = re.compile(r"^Question about this molecule:\s*(.+?)\s*$", re.MULTILINE)
_OPTION = re.compile(r"^Option ([A-D]):\s*(.+?)\s*$", re.MULTILINE)


def parse_prompt(text: str) -> dict:
    """(smiles, question, choices) out of one MoleculeQA prompt; a ValueError saying what is missing."""
    if "Molecule SELFIES:" in text:
        raise ValueError("the molecule is given as SELFIES; toolpath reads MoleculeQA's SMILES files "
                         "(the MolT5-style `CID  Question  Answer` ones)")
    smiles, question = _SMILES.search(text), _QUESTION.search(text)
    if not smiles:
        raise ValueError("no 'Molecule SMILES: ...' line in the question")
    if not question:
        raise ValueError("no 'Question about this molecule: ...' line in the question")
    options = dict(_OPTION.findall(text))
    if sorted(options) != list(LETTERS):
        raise ValueError(f"expected options A-D, found {', '.join(sorted(options)) or 'none'}")
    return {"smiles": mg.canonical(smiles.group(1), "Molecule SMILES"), "question": question.group(1),
            "choices": [options[k] for k in LETTERS]}


def _rows(path: Path):
    """(row name, prompt, letter, cid) per question of one file of either form."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            instances = json.loads(text)["Instances"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise BenchmarkDataError(f"{path}: not a MoleculeQA JSON file with 'Instances' ({err})") from None
        for i, item in enumerate(instances):
            output = item.get("output") if isinstance(item, dict) else None
            letter = output[0] if isinstance(output, list) and output else output
            yield f"instance {i}", str(item.get("input", "")) if isinstance(item, dict) else "", letter, \
                str(item.get("id", i)) if isinstance(item, dict) else str(i)
        return
    reader = csv.reader(text.splitlines(keepends=True), delimiter="\t")
    header = next(reader, None)
    if header is None or [h.strip().lower() for h in header[:3]] != ["cid", "question", "answer"]:
        raise BenchmarkDataError(f"{path}: expected MoleculeQA's header 'CID<TAB>Question<TAB>Answer', "
                                 f"got {header!r}")
    for n, row in enumerate(reader, start=2):
        if len(row) < 3:
            raise BenchmarkDataError(f"{path}: row {n}: expected 3 tab-separated fields, got {len(row)}")
        yield f"row {n}", row[1], row[2], row[0]


def files(path: Path) -> list[Path]:
    """The MoleculeQA files `path` names: itself, each topic's test split under a folder, or a folder's one file."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise BenchmarkDataError(f"MoleculeQA data not found: {path} (a MoleculeQA .txt or .json file, or the "
                                 "release's folder of topics)")
    tests = sorted(path.glob("*/test.txt"))
    if tests:
        return tests
    found = sorted(p for p in path.iterdir() if p.suffix in (".txt", ".tsv", ".json"))
    if len(found) != 1:
        raise BenchmarkDataError(f"{path}: expected the release's <topic>/test.txt files or one MoleculeQA file, "
                                 f"found {', '.join(p.name for p in found) or 'none'}")
    return found


def read_records(path: Path) -> list[Record]:
    """Every question in the MoleculeQA file(s) at `path`, each a Record of its topic (the folder's name when it
    is one of MoleculeQA's topics, else "moleculeqa")."""
    records: list[Record] = []
    for file in files(Path(path)):
        topic = file.parent.name if file.parent.name in TOPICS else "moleculeqa"
        for row, prompt, letter, cid in _rows(file):
            where = f"{file}: {row}"
            letter = str(letter or "").strip().strip("()").upper()
            if letter not in LETTERS:
                raise BenchmarkDataError(f"{where}: answer: expected a letter A-D, got {letter!r}")
            try:
                item = parse_prompt(prompt)
            except ValueError as err:
                raise BenchmarkDataError(f"{where}: {err}") from None
            records.append(Record(id=f"moleculeqa-{topic}-{len(records):05d}", category=topic,
                                  data=item | {"answer": letter, "cid": cid, "kind": "moleculeqa",
                                               "scorer": "choice"}))
    if not records:
        raise BenchmarkDataError(f"{path}: no questions in the MoleculeQA data")
    return records

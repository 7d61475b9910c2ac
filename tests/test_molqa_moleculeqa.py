"""`toolpath eval molqa --data PATH`: MoleculeQA's released files (tab-separated `CID  Question  Answer`, a topic
per folder, or the BioT5-style JSON copy) read into four-option tasks about the molecule, graded by the letter,
and every malformed row named by file and row."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

pytest.importorskip("rdkit", reason="molecules are read with RDKit (pip install rdkit)")

from toolpath.evals.benchmarks import BenchmarkDataError, get_benchmark  # noqa: E402
from toolpath.evals.benchmarks import molqa_moleculeqa as mq  # noqa: E402

RELEASE = Path(__file__).parent / "data" / "moleculeqa"  # a small folder in the release's layout, written here


def _prompt(smiles: str = "CCO", question: str = "What kind of compound is this molecule?",
            letters: str = "ABCD", molecule_line: str | None = None) -> str:
    options = "".join(f"Option {k}: choice {k}\n" for k in letters)
    molecule = molecule_line or f"Molecule SMILES: {smiles}"
    return (f"Please complete the following question answering task.\n{molecule}\n"
            f"Question about this molecule: {question}\n{options}Your answer for this question: ")


def _tsv(path: Path, rows: list[list[str]], header=("CID", "Question", "Answer")) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_the_release_folder_reads_each_topics_test_split():
    records = mq.read_records(RELEASE)
    assert [r.category for r in records] == ["Property", "Structure", "Structure"]
    aspirin = records[1].data
    assert aspirin["smiles"] == "CC(=O)Oc1ccccc1C(=O)O" and aspirin["cid"] == "2244" and aspirin["answer"] == "B"
    assert aspirin["question"] == "Which kind of ring does this molecule have?"
    assert aspirin["choices"][1] == "It has a benzene ring." and len(aspirin["choices"]) == 4


def test_a_question_becomes_a_task_about_the_molecule_graded_by_the_letter():
    bench = get_benchmark("molqa", data=RELEASE)
    record = next(r for r in bench.records() if r.data["cid"] == "2244")
    task = bench.to_task(record)
    assert task.inputs.graphs == ["CC(=O)Oc1ccccc1C(=O)O"]
    assert "B. It has a benzene ring." in task.instruction and "letter" in task.instruction
    assert "Molecule SMILES" not in task.instruction  # the molecule reaches the model as its graph input
    assert bench.score(record, "B").value == 1.0 and bench.score(record, "A. a cyclohexane").value == 0.0
    assert bench.score(record, "It has a benzene ring.").value == 1.0  # the option's text, quoted in full
    assert [r.category for r in bench.records(limit=2)] == ["Property", "Structure"]  # round-robin by topic


def test_one_file_of_either_form(tmp_path):
    tsv = _tsv(tmp_path / "test.txt", [["1", _prompt(), "C"]])
    assert [(r.category, r.data["answer"]) for r in mq.read_records(tsv)] == [("moleculeqa", "C")]
    biot5 = tmp_path / "task.json"
    biot5.write_text(json.dumps({"Instances": [{"id": "6-x", "input": _prompt("c1ccccc1"), "output": ["D"]}]}))
    assert [r.data["smiles"] for r in mq.read_records(biot5)] == ["c1ccccc1"]


@pytest.mark.parametrize("row, message", [
    (["1", _prompt(), "E"], r"row 2: answer: expected a letter A-D, got 'E'"),
    (["1", _prompt(smiles="C1CC("), "A"], r"row 2: Molecule SMILES: 'C1CC\(' is not a molecule RDKit can read"),
    (["1", _prompt(letters="ABC"), "A"], r"row 2: expected options A-D, found A, B, C"),
    (["1", _prompt(molecule_line="Molecule SELFIES: <bom>[C][C][O]<eom>"), "A"], r"row 2: .*given as SELFIES"),
    (["1", "no molecule here", "A"], r"row 2: no 'Molecule SMILES: \.\.\.' line"),
    (["1", _prompt()], r"row 2: expected 3 tab-separated fields, got 2"),
])
def test_a_malformed_row_is_one_error_naming_the_file_and_row(tmp_path, row, message):
    path = _tsv(tmp_path / "test.txt", [row])
    with pytest.raises(BenchmarkDataError, match=message) as err:
        mq.read_records(path)
    assert str(path) in str(err.value)


def test_files_that_are_not_moleculeqa_say_what_was_expected(tmp_path):
    with pytest.raises(BenchmarkDataError, match="expected MoleculeQA's header"):
        mq.read_records(_tsv(tmp_path / "test.txt", [], header=("id", "text", "label")))
    with pytest.raises(BenchmarkDataError, match="MoleculeQA data not found"):
        mq.read_records(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BenchmarkDataError, match="found none"):
        mq.read_records(tmp_path / "empty")
    bad = tmp_path / "task.json"
    bad.write_text("[1, 2]")
    with pytest.raises(BenchmarkDataError, match="not a MoleculeQA JSON file"):
        mq.read_records(bad)

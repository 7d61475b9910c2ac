"""Every case table under tests/data/scoring_cases: the official column was produced by running the benchmark's
published scoring code (benchmarks/scoring_cases/ says how); our `official` mode must reproduce it exactly,
and our `toolpath` mode must give the toolpath column (its differences named by `kind`)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

TABLES = sorted((Path(__file__).parent / "data" / "scoring_cases").glob("*.json"))


def _load(path: Path) -> tuple[dict, object]:
    table = json.loads(path.read_text())
    module, _, name = table["scorer"].partition(":")
    return table, getattr(importlib.import_module(module), name)


def test_there_are_case_tables():
    assert TABLES, "no case tables under tests/data/scoring_cases"


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_official_mode_reproduces_the_published_scorer_and_toolpath_mode_its_table(path):
    table, score_case = _load(path)
    assert table["cases"] and table["official_code"]
    wrong = {"official": [], "toolpath": []}
    for case in table["cases"]:
        for mode in wrong:
            got = score_case(case["case"], mode)
            if abs(got - case[mode]) > 1e-9:
                wrong[mode].append((case["id"], case["case"], case[mode], got))
    assert not wrong["official"], \
        f"{len(wrong['official'])} cases differ from the published scorer: {wrong['official'][:5]}"
    assert not wrong["toolpath"], \
        f"{len(wrong['toolpath'])} cases differ from the toolpath column: {wrong['toolpath'][:5]}"
    for case in table["cases"]:  # a difference is always named, an agreement never
        assert bool(case["kind"]) == (abs(case["official"] - case["toolpath"]) > 1e-9), case["id"]

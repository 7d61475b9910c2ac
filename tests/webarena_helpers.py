"""What the WebArena test files share: the placeholder sites at 127.0.0.1, a record from a task config, and the
string_match evaluator's config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import SHARED_DATA

from toolpath.evals.benchmarks import Record
from toolpath.evals.benchmarks.webarena import PLACEHOLDER_VARS

LOCAL = {var: f"http://127.0.0.1:{8001 + i}" + ("/admin" if var == "SHOPPING_ADMIN" else "")
         for i, var in enumerate(PLACEHOLDER_VARS.values())}
# where conftest points TOOLPATH_WEBARENA_DATA when it is there (a user's own setting wins, as in the package)
DEFAULT_DATA = Path(os.environ.get("TOOLPATH_WEBARENA_DATA") or SHARED_DATA / "webarena")
needs_data = pytest.mark.skipif(not DEFAULT_DATA.is_dir(), reason=f"WebArena task configs not at {DEFAULT_DATA}")


def rec(config: dict, rid: str = "t") -> Record:
    return Record(id=rid, category="+".join(config["sites"]), data={"config": config, "source": "test"})


def cfg(ev, sites=("shopping",), intent="a question", **extra) -> dict:
    return {"task_id": 1, "sites": list(sites), "intent": intent, "start_url": "__SHOPPING__", "eval": ev, **extra}


def sm(answers: dict, **extra) -> dict:
    """A string_match evaluator config with these reference answers."""
    return {"eval_types": ["string_match"], "reference_answers": answers, "reference_url": "", "program_html": [],
            **extra}

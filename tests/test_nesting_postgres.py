"""Nested runs on the PostgreSQL store: recorded under their parent, and an older store gets the columns."""

import pytest

pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'psycopg[binary]')")

from conftest import ROOT  # noqa: E402
from test_store_postgres import pg_server, pg_url  # noqa: E402,F401 — the module's server fixtures

from toolpath.agents.episode import run_episode  # noqa: E402
from toolpath.policies.scripted import ScriptedPolicy  # noqa: E402
from toolpath.runs import open_store  # noqa: E402
from toolpath.spec import parse_spec  # noqa: E402


def test_a_nested_run_on_postgres_and_the_columns_added_to_an_older_store(pg_url, home):
    import psycopg

    open_store(home).close()  # made by this toolpath, then made old: without the nesting columns
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN parent_id")
        conn.execute("ALTER TABLE runs DROP COLUMN parent_seq")
    spec = parse_spec({"id": "nest-pg", "instruction": "make the cup blue", "model": "scripted:none.yaml",
                       "inputs": {"images": [str(ROOT / "examples" / "assets" / "coffee.jpg")]},
                       "tools": ["edit_image", "final_answer"]})
    script = [{"text": "", "tool_calls": [{"name": "edit_image", "arguments": {
        "instruction": "recolor the red cup blue", "image": "image_1"}}]}, {}, {},
        {"text": "", "tool_calls": [{"name": "final_answer", "arguments": {"answer": "edited_1"}}]}]
    with open_store(home) as s:
        r = run_episode(spec, s, policy=ScriptedPolicy(script))
        assert r.status == "finished", r.error
        [child] = s.child_runs(r.run_id)
        assert (child["agent"], child["status"], child["parent_id"], child["parent_seq"]) == (
            "fast_slow", "finished", r.run_id, 2)
        assert [x["id"] for x in s.list_runs()] == [r.run_id]
        assert r.steps == 4 and child["steps"] == 2

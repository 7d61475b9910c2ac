from pathlib import Path

from toolpath.runs import Store


def test_wal_mode_and_tables(store):
    mode = store._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    names = {r[0] for r in store._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "steps", "artifacts", "evals", "eval_samples"} <= names


def test_artifacts_are_content_addressed_and_deduplicated(store, tmp_path):
    a = store.put_artifact(b"same bytes", name="a.png")
    b = store.put_artifact(b"same bytes", name="b.png")
    assert a.sha256 == b.sha256 and a.path == b.path
    assert Path(a.path).read_bytes() == b"same bytes"
    assert Path(a.path).parent.name == a.sha256[:2] and a.mime == "image/png"
    assert store._conn.execute("SELECT COUNT(*) FROM artifacts").fetchone()[0] == 1


def test_steps_are_idempotent_by_seq_and_transcript_rebuilds(store):
    rid = store.create_run("{}", "t", "m", "react")
    msg = {"role": "user", "content": "hi"}
    store.put_step(rid, 1, "policy", {"messages": [msg]}, 0.0, 0.1)
    store.put_step(rid, 1, "policy", {"messages": [{"role": "user", "content": "again"}]}, 0.0, 0.1)
    store.put_step(rid, 2, "tools", {"messages": []}, 0.0, 0.1)
    assert [m.content for m in store.transcript(rid)] == ["again"]
    assert store.drop_steps_after(rid, 1) == 1
    assert [s["seq"] for s in store.steps(rid)] == [1]


def test_find_run_by_unique_prefix(store):
    rid = store.create_run("{}", "t", "m", "react", run_id="abc-123")
    store.create_run("{}", "t", "m", "react", run_id="abd-456")
    assert store.find_run("abc")["id"] == rid
    assert store.find_run("ab") is None  # ambiguous


def test_home_from_environment(home):
    s = Store()
    assert s.db_path == home / "runs.db" and s.db_path.exists()
    s.close()


def test_a_running_run_whose_process_is_gone_shows_as_interrupted(store):
    import subprocess

    rid = store.create_run("{}", "t", "m", "react")
    assert store.get_run(rid)["status"] == "running"  # this process is alive
    dead = subprocess.Popen(["true"])
    dead.wait()
    store.update_run(rid, pid=dead.pid)
    assert store.get_run(rid)["status"] == "interrupted"
    assert store.list_runs()[0]["status"] == "interrupted"


def test_a_store_made_before_a_column_existed_is_upgraded_on_open(home):
    import sqlite3

    home.mkdir(parents=True)
    old = sqlite3.connect(home / "runs.db")
    old.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, task_id TEXT NOT NULL, spec TEXT NOT NULL, model TEXT NOT NULL, "
                "agent TEXT NOT NULL, status TEXT NOT NULL, answer TEXT, error TEXT, score REAL, steps INTEGER NOT NULL "
                "DEFAULT 0, tokens_in INTEGER NOT NULL DEFAULT 0, tokens_out INTEGER NOT NULL DEFAULT 0, seconds REAL "
                "NOT NULL DEFAULT 0, eval_id TEXT, created REAL NOT NULL, updated REAL NOT NULL)")
    old.commit()
    old.close()
    s = Store(home)
    rid = s.create_run("{}", "t", "m", "react")
    assert s.get_run(rid)["pid"] > 0
    s.close()


def test_cli_reports_a_broken_store_without_a_traceback(home):
    from conftest import toolpath_cli

    home.mkdir(parents=True)
    (home / "runs.db").write_bytes(b"this is not a database" * 100)
    r = toolpath_cli("runs", "list", home=home)
    assert r.returncode == 1 and "runs.db" in r.stderr and "Traceback" not in r.stderr

"""TOOLPATH_DB=postgresql://…: the same store on a real PostgreSQL that this module starts (Debian's postgresql:
initdb + pg_ctl, data in a temporary folder, a unix socket only), or skips naming why it could not.

Covers the store's operations, an episode killed with -9 and resumed through the Postgres checkpointer, two
eval worker processes writing one store at once, and the errors for a bad URL and an unreachable server."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, toolpath_cli, write

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'psycopg[binary]')")
pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed")

from toolpath.runs import Store, open_store  # noqa: E402
from toolpath.runs.postgres import PostgresStore, StoreError  # noqa: E402

PG_BINS = [*sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True),  # Debian: newest version first
           *(Path(p) for p in ("/usr/local/bin", "/usr/bin"))]


def _pg_bin(name: str) -> str | None:
    for d in PG_BINS:
        if (d / name).exists():
            return str(d / name)
    return shutil.which(name)


@pytest.fixture(scope="module")
def pg_server():
    """(socket folder, user) of a PostgreSQL server running for this module."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL is not installed (no initdb/pg_ctl; Debian: apt-get install postgresql)")
    prefix: list[str] = []
    user = getpass.getuser()
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        if not shutil.which("runuser"):
            pytest.skip("running as root and runuser is missing: cannot start PostgreSQL as an unprivileged user")
        user = "nobody"
        prefix = ["runuser", "-u", user, "--"]
    tmp = Path(tempfile.mkdtemp(prefix="toolpath-pg-"))
    tmp.chmod(0o755)
    if prefix:
        shutil.chown(tmp, user)
    data = tmp / "data"
    try:
        r = subprocess.run([*prefix, initdb, "-D", str(data), "-A", "trust", "-U", user, "-E", "UTF8", "--no-sync"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode:
            pytest.skip(f"initdb failed: {r.stderr.strip()[-300:]}")
        r = subprocess.run([*prefix, pg_ctl, "-D", str(data), "-l", str(tmp / "log"), "-w", "-t", "30",
                            "-o", f"-k {tmp} -c listen_addresses='' -F -c max_connections=100", "start"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode:
            log = (tmp / "log").read_text()[-300:] if (tmp / "log").exists() else ""
            pytest.skip(f"PostgreSQL did not start: {r.stderr.strip()[-300:]} {log}")
        yield tmp, user
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], capture_output=True,
                           timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server, monkeypatch):
    """A fresh database per test, set as TOOLPATH_DB for this process and the processes it starts."""
    sock, user = pg_server
    name = "t_" + uuid.uuid4().hex[:10]
    with psycopg.connect(f"postgresql://{user}@/postgres?host={sock}", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = f"postgresql://{user}@/{name}?host={sock}"
    monkeypatch.setenv("TOOLPATH_DB", url)
    return url


@pytest.fixture
def pg_store(pg_url, home):
    s = open_store(home)
    yield s
    s.close()


def _rows(url: str, sql: str, args=()):
    with psycopg.connect(url) as conn:
        return conn.execute(sql, args).fetchall()


def test_store_picks_postgres_from_toolpath_db(pg_store, pg_url, monkeypatch, tmp_path):
    assert isinstance(pg_store, PostgresStore) and pg_store.db_path == pg_url
    tables = {r[0] for r in _rows(pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"runs", "steps", "artifacts", "evals", "eval_samples"} <= tables
    monkeypatch.delenv("TOOLPATH_DB")
    with open_store(tmp_path / "other") as plain:  # unset: the SQLite store, as before
        assert type(plain) is Store and plain.db_path.exists()


def test_the_same_operations_as_sqlite(pg_store, pg_url, home):
    s = pg_store
    rid = s.create_run('{"id": "t"}', "t", "m", "react", run_id="abc-123", eval_id=None)
    s.create_run("{}", "t", "m", "react", run_id="abd-456")
    assert s.get_run(rid)["status"] == "running" and s.get_run("nope") is None
    s.update_run(rid, steps=3, tokens_in=10, tokens_out=5, seconds=1.25, score=0.5)
    run = s.get_run(rid)
    assert (run["steps"], run["tokens_in"], run["seconds"], run["score"], run["pid"]) == (3, 10, 1.25, 0.5, os.getpid())
    assert isinstance(run["created"], float) and abs(run["created"] - time.time()) < 60  # double precision, not float4
    with pytest.raises(ValueError):
        s.update_run(rid, bogus=1)
    assert s.find_run("abc")["id"] == rid and s.find_run("ab") is None and s.find_run("a%") is None
    assert s.find_run("ABC")["id"] == rid  # LIKE ignores case, as SQLite's
    assert [r["id"] for r in s.list_runs()] == ["abd-456", "abc-123"]

    # steps: idempotent by seq, deferred until committed, dropped after a seq
    s.put_step(rid, 1, "policy", {"messages": [{"role": "user", "content": "hi"}]}, 0.0, 0.1)
    s.put_step(rid, 1, "policy", {"messages": [{"role": "user", "content": "again"}]}, 0.0, 0.1)
    s.put_step(rid, 2, "tools", {"messages": []}, 0.0, 0.1, tokens_in=4)
    s.put_step(rid, 3, "policy", {"messages": [{"role": "assistant", "content": "later"}]}, 0.0, 0.1, defer=True)
    s.update_run(rid, defer=True, steps=9)
    assert [x["seq"] for x in s.steps(rid)] == [1, 2] and s.get_run(rid)["steps"] == 3
    s.commit_deferred(rid)
    assert [x["seq"] for x in s.steps(rid)] == [1, 2, 3] and s.get_run(rid)["steps"] == 9
    assert [m.content for m in s.transcript(rid)] == ["again", "later"]
    assert [x["seq"] for x in s.steps(rid, upto=2)] == [1, 2]
    assert s.drop_steps_after(rid, 1) == 2 and [x["seq"] for x in s.steps(rid)] == [1]

    # artifacts: files under the home folder, one row per content
    a = s.put_artifact(b"same bytes", name="a.png")
    b = s.put_artifact(b"same bytes", name="b.png")
    assert a.sha256 == b.sha256 and Path(a.path).read_bytes() == b"same bytes" and a.mime == "image/png"
    assert Path(a.path).is_relative_to(home / "artifacts")
    assert _rows(pg_url, "SELECT COUNT(*) FROM artifacts")[0][0] == 1

    # evals and their samples, in the order they were last written
    e = s.create_eval("arith", "m", {"limit": 3, "seed": 0}, 3, eval_id="e-1")
    s.put_eval_sample(e, "s1", rid, "add", "finished", 1.0, 7, 0.5, {"answer": "2"})
    s.put_eval_sample(e, "s2", None, "mul", "failed", 0.0, 0, 0.1)
    s.put_eval_sample(e, "s1", rid, "add", "finished", 0.5, 8, 0.6)  # a replace moves it last, as in SQLite
    rows = s.eval_samples(e)
    assert [(r["sample_id"], r["score"], r["tokens"]) for r in rows] == [("s2", 0.0, 0), ("s1", 0.5, 8)]
    assert set(rows[0]) == {"eval_id", "sample_id", "run_id", "category", "status", "score", "tokens", "seconds",
                            "detail"}
    ev = s.get_eval(e)
    assert ev["params"] == {"limit": 3, "seed": 0} and ev["done"] == 2 and ev["summary"] is None
    s.finish_eval(e, {"score": 0.25})
    s.create_eval("arith", "m", {}, 9, eval_id="e-2")
    assert [(x["id"], x["done"]) for x in s.list_evals()] == [("e-2", 0), ("e-1", 2)]
    assert s.get_eval(e)["summary"] == {"score": 0.25} and s.get_eval(e)["finished"]
    assert s.find_eval("e-1")["id"] == "e-1" and s.find_eval("e-") is None


def test_what_postgres_cannot_hold_is_cleaned_and_secrets_redacted(pg_store, pg_url, monkeypatch):
    monkeypatch.setenv("TOOLPATH_TEST_API_KEY", "sk-pg-0123456789abcdef")
    rid = pg_store.create_run('{"id": "t", "metadata": {"k": "sk-pg-0123456789abcdef"}}', "t", "m", "react")
    # PostgreSQL text holds no NUL and no lone surrogate; JSON holds no NaN
    pg_store.update_run(rid, status="failed", answer="a\x00b", error="\ud800 key sk-pg-0123456789abcdef",
                        score=float("nan"))
    pg_store.put_step(rid, 1, "policy", {"messages": [{"role": "assistant", "content": "\x00\ud800"}],
                                         "args": {"x": float("nan"), "c": 1 + 2j}}, 0.0, 0.1)
    e = pg_store.create_eval("arith", "m", {}, 1)
    pg_store.put_eval_sample(e, "s1", rid, "add", "failed", float("nan"), 0, 0.1, {"answer": "\x00"})
    run = pg_store.get_run(rid)
    assert (run["answer"], run["error"], run["score"]) == ("a\ufffdb", "\ufffd key [redacted]", None)
    assert "sk-pg" not in run["spec"] and "[redacted]" in run["spec"]
    step = pg_store.steps(rid)[0]["payload"]
    assert step == {"messages": [{"role": "assistant", "content": "\ufffd\ufffd"}], "args": {"x": None, "c": "(1+2j)"}}
    assert pg_store.eval_samples(e)[0]["score"] == 0.0


def test_a_read_only_postgres_store_reads_and_refuses_to_write(pg_store, pg_url, home):
    rid = pg_store.create_run("{}", "t", "m", "react", run_id="r-1", eval_id="e-1")
    pg_store.create_eval("arith", "m", {}, 1, eval_id="e-1")
    with open_store(home, readonly=True) as ro:
        assert isinstance(ro, PostgresStore) and ro.readonly
        assert [r["id"] for r in ro.list_runs()] == [rid] and [r["id"] for r in ro.unclaimed_runs("e-1")] == [rid]
        with pytest.raises(StoreError, match="opened read-only"):
            ro.update_run(rid, status="finished")
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):  # the server refuses too, whatever is sent
            ro._conn.execute("UPDATE runs SET status = 'x'")
    assert pg_store.get_run(rid)["status"] == "running"


def test_a_read_only_postgres_store_of_an_empty_database_says_so(pg_url, home):
    with pytest.raises(StoreError, match="no toolpath store in this database yet"):
        open_store(home, readonly=True)
    assert not home.exists()  # and it made no folder either


def test_a_dead_pid_is_interrupted_only_on_the_machine_it_ran_on(pg_store, pg_url):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = pg_store.create_run("{}", "t", "m", "react", run_id="r-here")
    there = pg_store.create_run("{}", "t", "m", "react", run_id="r-there")
    pg_store.update_run(here, pid=dead.pid)
    pg_store.update_run(there, pid=dead.pid)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE runs SET host = 'another-machine' WHERE id = %s", (there,))
    assert pg_store.get_run(here)["status"] == "interrupted"  # as in SQLite: `toolpath resume` may continue it
    assert pg_store.get_run(there)["status"] == "running"  # its pid means nothing here
    assert {r["id"]: r["status"] for r in pg_store.list_runs()} == {here: "interrupted", there: "running"}


def test_episode_killed_with_9_resumes_through_the_postgres_checkpointer(pg_url, home, tmp_path):
    n = 6
    ticks = tmp_path / "ticks.txt"
    responses = "\n".join(
        f"- {{delay: 0.3, tool_calls: [{{name: tick, arguments: {{label: t{i}}}}}]}}" for i in range(1, n + 1))
    responses += "\n- {delay: 0.3, tool_calls: [{name: final_answer, arguments: {answer: all ticked}}]}\n"
    write(tmp_path / "r.yaml", responses)
    task = write(tmp_path / "task.yaml", f"id: ticker\ninstruction: tick {n} times\n"
                                         f"model: scripted:{tmp_path / 'r.yaml'}\n"
                                         f"tools: [tick, final_answer]\nlimits: {{max_steps: 20}}\n")
    env = {**os.environ, "TOOLPATH_HOME": str(home), "TOOLPATH_PLUGINS": "helpers", "TICK_FILE": str(ticks),
           "PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}"}
    proc = subprocess.Popen([sys.executable, "-m", "toolpath.cli", "run", str(task), "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        if ticks.exists() and len(ticks.read_text().split()) >= 3:
            break
        if proc.poll() is not None:
            pytest.fail("the run ended before its third tick: " + proc.stderr.read())
        time.sleep(0.02)
    else:
        proc.kill()
        pytest.fail("the run never reached its third tick: " + proc.stderr.read())
    time.sleep(0.1)  # past the checkpoint write, into the next policy call's 0.3 s
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    done_before = ticks.read_text().split()
    assert 3 <= len(done_before) < n

    with open_store(home) as store:
        (run,) = store.list_runs()
        assert run["status"] == "interrupted"
        assert _rows(pg_url, "SELECT COUNT(*) FROM checkpoints WHERE thread_id = %s", (run["id"],))[0][0] > 0
        assert not (home / "runs.db").exists()  # nothing went to SQLite

        sub = {k: env[k] for k in ("TOOLPATH_PLUGINS", "TICK_FILE", "PYTHONPATH")}
        r = toolpath_cli("resume", run["id"], "--json", home=home, env=sub)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["status"] == "finished" and out["answer"] == "all ticked" and out["steps"] == n + 1
        assert f"resuming {run['id']} after step" in r.stderr
        assert ticks.read_text().split() == [f"t{i}" for i in range(1, n + 1)]  # none lost, none repeated
        steps = store.steps(run["id"])
        assert [s["seq"] for s in steps] == list(range(0, 2 * (n + 1) + 1))
        assert [s["node"] for s in steps[1:]] == ["policy", "tools"] * (n + 1)
        assert store.get_run(run["id"])["status"] == "finished"
    # a finished run keeps one checkpoint; ordinary channel writes are not stored
    assert _rows(pg_url, "SELECT COUNT(*) FROM checkpoints WHERE thread_id = %s", (run["id"],))[0][0] == 1
    assert _rows(pg_url, "SELECT COUNT(*) FROM checkpoint_writes WHERE thread_id = %s AND channel NOT LIKE '\\_\\_%%'",
                 (run["id"],))[0][0] == 0
    again = toolpath_cli("resume", run["id"], "--json", home=home)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["steps"] == n + 1


def test_two_worker_processes_write_one_store(pg_url, home, monkeypatch):
    from toolpath.evals.runner import run_eval

    monkeypatch.setenv("PYTHONPATH", f"{ROOT / 'tests'}{os.pathsep}{ROOT}")  # spawned workers import helpers
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    with open_store(home) as store:
        res = run_eval("arith", store, model="python:helpers:SlowArithPolicy", limit=8, workers=2)
        rows = store.eval_samples(res.eval_id)
        runs = store.list_runs(limit=100, eval_id=res.eval_id)
        assert len(rows) == 8 and {r["status"] for r in rows} == {"finished"}
        assert len(runs) == 8 and all(r["status"] == "finished" for r in runs)
        assert len({r["pid"] for r in runs}) == 2 and os.getpid() not in {r["pid"] for r in runs}
        assert all(store.steps(r["id"]) for r in runs)
        assert store.get_eval(res.eval_id)["done"] == 8
    # and `toolpath eval list` in another process sees it
    listed = json.loads(toolpath_cli("eval", "list", "--json", home=home).stdout)
    assert [(x["id"], x["done"]) for x in listed] == [(res.eval_id, 8)]


def test_two_cli_runs_started_at_once_on_an_empty_database(pg_url, home, tmp_path):
    """Both create the tables and run LangGraph's migrations at the same moment: neither fails."""
    write(tmp_path / "r.yaml", "- {tool_calls: [{name: final_answer, arguments: {answer: done}}]}\n")
    task = write(tmp_path / "task.yaml", f"id: once\ninstruction: answer\nmodel: scripted:{tmp_path / 'r.yaml'}\n"
                                         "tools: [final_answer]\n")
    env = {**os.environ, "TOOLPATH_HOME": str(home), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "toolpath.cli", "run", str(task), "--json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    ids = {json.loads(out)["run_id"] for out, _ in outs}
    with open_store(home) as store:
        assert {r["id"] for r in store.list_runs()} == ids and len(ids) == 2
        assert all(store.get_run(i)["status"] == "finished" and store.steps(i) for i in ids)


def test_a_bad_url_or_an_unreachable_server_names_toolpath_db_and_the_host(monkeypatch, home):
    monkeypatch.setenv("TOOLPATH_DB", "mysql://root@db.example/x")
    with pytest.raises(StoreError, match=r"TOOLPATH_DB='mysql://root@db.example/x': expected a PostgreSQL URL"):
        open_store(home)
    monkeypatch.setenv("TOOLPATH_DB", "postgresql://u:secret@127.0.0.1:1/toolpath?connect_timeout=3")
    with pytest.raises(StoreError, match=r"TOOLPATH_DB=.*cannot connect to PostgreSQL on host 127\.0\.0\.1 port 1, "
                                         r"database toolpath") as err:
        open_store(home)
    assert "secret" not in str(err.value)
    monkeypatch.setenv("TOOLPATH_DB", "postgresql://u@127.0.0.1:notaport/x")
    with pytest.raises(StoreError, match="TOOLPATH_DB"):
        open_store(home)
    r = toolpath_cli("runs", "list", home=home)  # the CLI fails, and says why
    assert r.returncode != 0 and "TOOLPATH_DB" in r.stderr and "127.0.0.1" in r.stderr


def test_the_viewer_reads_a_postgres_store(pg_store, pg_url, home):
    import urllib.request

    from toolpath.viewer import serve

    run_id = pg_store.create_run('{"id": "t"}', "t", "scripted", "react")
    pg_store.put_step(run_id, 1, "policy", {"messages": [{"role": "assistant", "content": "hello from postgres"}]},
                      0.0, 0.1)
    pg_store.commit_deferred(run_id)
    eval_id = pg_store.create_eval("arith", "local", {}, 1)
    pg_store.put_eval_sample(eval_id, "s1", run_id, "add", "finished", 1.0, 3, 0.1, {})
    server, url = serve(home, port=0)
    try:
        runs = json.loads(urllib.request.urlopen(f"{url}api/runs").read())
        steps = json.loads(urllib.request.urlopen(f"{url}api/runs/{run_id}/steps").read())
        samples = json.loads(urllib.request.urlopen(f"{url}api/evals/{eval_id}/samples").read())
    finally:
        server.shutdown()
    assert [r["id"] for r in runs["runs"]] == [run_id]
    assert "hello from postgres" in json.dumps(steps)
    assert samples["total"] == 1

import subprocess
from pathlib import Path

from conftest import write_old_runs_table

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


def test_a_running_run_whose_process_exited_but_was_not_reaped_shows_as_interrupted(store):
    import os
    import subprocess
    import sys
    import time

    if not os.path.isdir("/proc/self"):
        import pytest

        pytest.skip("a zombie is told from /proc")
    exited = subprocess.Popen([sys.executable, "-c", "pass"])  # never waited for: a zombie, as an orphaned
    rid = store.create_run("{}", "t", "m", "react")               # worker is under a pid 1 that does not reap
    store.update_run(rid, pid=exited.pid)
    try:
        while open(f"/proc/{exited.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)
        assert store.get_run(rid)["status"] == "interrupted"
    finally:
        exited.wait()


def test_a_store_made_before_a_column_existed_is_upgraded_on_open(home):
    write_old_runs_table(home, pid=False).close()  # as written before `pid`
    s = Store(home)
    rid = s.create_run("{}", "t", "m", "react")
    assert s.get_run(rid)["pid"] > 0
    s.close()


def test_processes_opening_a_new_store_together_all_get_it(tmp_path):
    """Each opener checks for the columns added since the first release and adds what is missing; done together,
    two of them once both added the same column and the second failed ("duplicate column name")."""
    import subprocess
    import sys
    import time

    go = tmp_path / "go"  # every process is imported and waiting before any opens: they open within a moment
    code = ("import os, sys, time; from toolpath.runs import Store\n"
            "while not os.path.exists(sys.argv[2]): time.sleep(0.001)\n"
            "Store(sys.argv[1]).close()")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "home"), str(go)], stderr=subprocess.PIPE,
                              text=True) for _ in range(6)]
    time.sleep(3)
    go.touch()
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    s = Store(tmp_path / "home")
    assert s.get_run(s.create_run("{}", "t", "m", "react"))["parent_id"] is None
    s.close()


def test_cli_reports_a_broken_store_without_a_traceback(home):
    from conftest import toolpath_cli

    home.mkdir(parents=True)
    (home / "runs.db").write_bytes(b"this is not a database" * 100)
    r = toolpath_cli("runs", "list", home=home)
    assert r.returncode == 1 and "runs.db" in r.stderr and "Traceback" not in r.stderr


# ---- what the store writes: strict JSON and valid text, whatever a model produced ---------------------------

def test_a_step_with_nan_a_lone_surrogate_and_objects_json_lacks_is_stored_as_strict_json(store):
    import json
    import math

    rid = store.create_run("{}", "t", "m", "react")
    args = {"x": float("nan"), "y": float("inf"), "z": -math.inf, "text": "half \ud800 pair \U0001F600 nul \x00.",
            "pair": "\ud83d\ude00", "c": 1 + 2j, "b": b"\xff\x00", "keys": {"ctrl", "c"}, (1, 2): "tuple key",
            "path": Path("/tmp/x.png")}
    store.put_step(rid, 1, "policy", {"messages": [{"role": "assistant", "content": "\udfff",
                                                     "tool_calls": [{"id": "c", "name": "click", "arguments": args}]}]},
                   0.0, 0.1)
    raw = store._conn.execute("SELECT payload FROM steps WHERE run_id = ?", (rid,)).fetchone()[0]

    def no_constants(name):
        raise AssertionError(f"{name} is not JSON")

    stored = json.loads(raw, parse_constant=no_constants)["messages"][0]  # strict: NaN/Infinity would raise
    got = stored["tool_calls"][0]["arguments"]
    assert (got["x"], got["y"], got["z"]) == (None, None, None)  # JSON has no such numbers: null, as JS writes them
    assert got["text"] == "half \ufffd pair \U0001F600 nul \ufffd." and stored["content"] == "\ufffd"
    assert got["pair"] == "\U0001F600"  # a well-formed pair is its character
    assert got["c"] == "(1+2j)" and got["b"] == repr(b"\xff\x00") and got["keys"] in ("{'ctrl', 'c'}", "{'c', 'ctrl'}")
    assert got["(1, 2)"] == "tuple key" and got["path"] == "/tmp/x.png"
    assert [m.content for m in store.transcript(rid)] == ["\ufffd"]  # and it reads back as a message


def test_text_columns_eval_rows_and_nesting_deeper_than_json_can_take_are_stored(store):
    import json

    rid = store.create_run("{}", "t\ud800", "m", "react")
    store.update_run(rid, status="finished", answer="42 \ud800", error="bad \x00 byte", score=float("nan"))
    run = store.get_run(rid)
    assert (run["task_id"], run["answer"], run["error"], run["score"]) == ("t\ufffd", "42 \ufffd",
                                                                          "bad \ufffd byte", None)
    deep: list = []
    for _ in range(5000):  # json.dumps would recurse out of the interpreter's stack on this
        deep = [deep]
    store.put_step(rid, 1, "tools", {"messages": [], "result": deep}, 0.0, 0.1)
    text = json.dumps(store.steps(rid)[0]["payload"])
    assert "nested deeper than" in text
    e = store.create_eval("arith", "m", {"limit": float("inf")}, 1)
    store.put_eval_sample(e, "s\ud800", rid, "add", "finished", float("nan"), 3, float("nan"),
                          {"answer": "\ud800", "metrics": {"iou": float("nan")}, "odd": {1, 2}})
    store.finish_eval(e, {"score": float("nan"), "by_category": {"add": {"score": float("-inf")}}})
    (row,) = store.eval_samples(e)
    assert (row["sample_id"], row["score"], row["seconds"]) == ("s\ufffd", 0.0, 0.0)
    assert json.loads(row["detail"]) == {"answer": "\ufffd", "metrics": {"iou": None}, "odd": "{1, 2}"}
    ev = store.get_eval(e)
    assert ev["params"] == {"limit": None} and ev["summary"] == {"score": None, "by_category": {"add": {"score": None}}}


def test_a_spec_is_stored_compact_and_cleaned(store):
    rid = store.create_run('{"id": "t", "limits": {"max_steps": 9}, "metadata": {"x": NaN, "s": "\\ud800"}}',
                           "t", "m", "react")
    spec = store.get_run(rid)["spec"]
    assert '"max_steps":9' in spec and '"x":null' in spec and "\ufffd" in spec and "NaN" not in spec


# ---- read-only ------------------------------------------------------------------------------------------------

def _as_reader(code: str, *args) -> "subprocess.CompletedProcess":
    """Run Python `code` in a process that cannot write where file modes forbid it: as root (CI, this machine),
    without the capabilities that pass over file modes."""
    import os
    import shutil
    import subprocess
    import sys

    from conftest import ROOT

    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            import pytest

            pytest.skip("running as root without setpriv (util-linux): cannot drop the capability to write anywhere")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TOOLPATH_DB", None)
    return subprocess.run([*prefix, sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=60)


def _read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)


def test_a_read_only_home_is_read_by_a_read_only_store_and_a_writer_is_told_why_it_cannot(tmp_path):
    import json

    home = tmp_path / "home"
    with Store(home) as s:
        rid = s.create_run('{"id": "t"}', "t", "m", "react")
        s.put_step(rid, 1, "policy", {"messages": [{"role": "assistant", "content": "hi"}]}, 0.0, 0.1)
        s.update_run(rid, status="finished", answer="42")
        e = s.create_eval("arith", "m", {}, 1)
        s.put_eval_sample(e, "s1", rid, "add", "finished", 1.0, 3, 0.1, {"answer": "42"})
        s.finish_eval(e, {"score": 1.0})
    before = sorted(p.name for p in home.iterdir())
    _read_only(home)
    code = """
import json, sys
from toolpath.runs import Store, StoreError
home = sys.argv[1]
with Store(home, readonly=True) as s:
    (run,) = s.list_runs()
    ev = s.find_eval(s.list_evals()[0]["id"][:4])
    out = {"run": s.get_run(run["id"])["answer"], "steps": [x["payload"] for x in s.steps(run["id"])],
           "samples": len(s.eval_samples(ev["id"])), "summary": ev["summary"], "found": s.find_run(run["id"][:6])["id"]}
    try:
        s.create_run("{}", "t", "m", "react")
    except StoreError as err:
        out["write"] = str(err)
try:
    Store(home)
except StoreError as err:
    out["writer"] = str(err)
print(json.dumps(out))
"""
    try:
        r = _as_reader(code, home)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        after = sorted(p.name for p in home.iterdir())
    finally:
        for p in [home, *home.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    assert out["run"] == "42" and out["steps"] == [{"messages": [{"role": "assistant", "content": "hi"}]}]
    assert out["samples"] == 1 and out["summary"] == {"score": 1.0} and out["found"] == rid
    assert "opened read-only" in out["write"]
    assert f"cannot open the run store {home / 'runs.db'} for writing" in out["writer"] and "read-only" in out["writer"]
    assert after == before  # no WAL, no shared-memory file, nothing written


def test_a_read_only_store_of_a_home_with_no_store_yet_is_empty_until_one_appears(tmp_path):
    home = tmp_path / "nothing-here"
    with Store(home, readonly=True) as ro:
        assert ro.list_runs() == [] and ro.list_evals() == [] and not home.exists()  # it created nothing
        with Store(home) as rw:
            rid = rw.create_run("{}", "t", "m", "react")
        assert [r["id"] for r in ro.list_runs()] == [rid]
        conn = ro.read_connection()
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
        conn.close()

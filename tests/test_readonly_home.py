"""A home the user can read but not write (a shared results folder, a read-only mount): every command that only
reads the store works there, and `report` writes where it is told or says where it could not write.

As root (CI, this machine) file modes bind nobody, so the commands run without the capabilities that pass over
them (setpriv); as another user the modes alone do it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from toolpath.runs import Store


def _reader(*argv: str, home: Path) -> subprocess.CompletedProcess:
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv (util-linux): cannot drop the capability to write anywhere")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOOLPATH_HOME": str(home)}
    env.pop("TOOLPATH_DB", None)
    return subprocess.run([*prefix, sys.executable, *argv], capture_output=True, text=True, env=env, timeout=120,
                          cwd=ROOT)


@pytest.fixture
def read_only_home(tmp_path):
    """(home, run id, eval id): a store with one finished eval of one sample, then made read-only."""
    home = tmp_path / "home"
    with Store(home) as s:
        rid = s.create_run('{"id": "t"}', "t", "m", "react")
        s.put_step(rid, 1, "policy", {"messages": [{"role": "assistant", "content": "hello"}]}, 0.0, 0.1)
        s.update_run(rid, status="finished", answer="42", steps=1)
        e = s.create_eval("arith", "m", {"limit": 1, "seed": 0}, 1)
        s.put_eval_sample(e, "arith-0-000", rid, "add", "finished", 1.0, 3, 0.1, {"answer": "42"})
        s.finish_eval(e, {"score": 1.0, "n": 1})
    for p in [home, *home.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    yield home, rid, e
    for p in [home, *home.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def test_reading_commands_work_on_a_home_they_cannot_write(read_only_home, tmp_path):
    home, rid, eval_id = read_only_home
    before = sorted(p.name for p in home.rglob("*"))
    listed = _reader("-m", "toolpath.cli", "runs", "list", "--json", home=home)
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [rid]
    shown = _reader("-m", "toolpath.cli", "runs", "show", rid[:10], home=home)
    assert shown.returncode == 0 and "answer: 42" in shown.stdout, shown.stderr
    evals = _reader("-m", "toolpath.cli", "eval", "list", "--json", home=home)
    assert evals.returncode == 0 and json.loads(evals.stdout)[0]["id"] == eval_id, evals.stderr
    out = tmp_path / "report"
    report = _reader("-m", "toolpath.cli", "report", eval_id, "--out", str(out), home=home)
    assert report.returncode == 0, report.stderr
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    # the viewer's reads: its pages come from the same Reader
    code = ("import json, sys; from toolpath.viewer.data import Reader; r = Reader(sys.argv[1]); "
            "rows, total = r.runs_page(0, 10); "
            "print(json.dumps([total, rows[0]['id'], r.steps_page(rows[0]['id'], 0, 10)[1]]))")
    viewer = _reader("-c", code, str(home), home=home)
    assert viewer.returncode == 0, viewer.stderr
    assert json.loads(viewer.stdout) == [1, rid, 1]
    assert sorted(p.name for p in home.rglob("*")) == before  # nothing written: no WAL, no reports folder


def test_report_says_where_it_could_not_write(read_only_home):
    home, _, eval_id = read_only_home
    r = _reader("-m", "toolpath.cli", "report", eval_id, home=home)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"cannot write to {home / 'reports'}" in r.stderr and "--out" in r.stderr


def test_a_writing_command_on_a_read_only_home_says_why(read_only_home, tmp_path):
    home, _, _ = read_only_home
    task = tmp_path / "task.yaml"
    (tmp_path / "r.yaml").write_text("- {tool_calls: [{name: final_answer, arguments: {answer: hi}}]}\n")
    task.write_text(f"id: t\ninstruction: say hi\nmodel: scripted:{tmp_path / 'r.yaml'}\ntools: [final_answer]\n")
    r = _reader("-m", "toolpath.cli", "run", str(task), home=home)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"cannot open the run store {home / 'runs.db'} for writing" in r.stderr

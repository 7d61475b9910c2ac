"""What the store writes: no secret in any text or JSON column, whatever path it reached the store by; and an
artifact is a copy of a file's bytes, never of its setuid, setgid, sticky or exec bits."""

import os
import stat
import threading
from pathlib import Path

import pytest

from toolpath.redact import MARK, register_secret
from toolpath.runs import Store

KEY = "sk-live-7f3a9c2e4b1d8f60aa"  # the API key a policy was given, in the environment by a secret's name
FILE_KEY = "file-key-5e1c7a9d3b2f"  # a key read from a file and registered, never in the environment


def _all_text(store: Store) -> str:
    """Every value of every table of the store, as one text."""
    tables = [r[0] for r in store._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return "\n".join(repr(tuple(row)) for t in tables for row in store._conn.execute(f"SELECT * FROM {t}"))


def test_no_key_reaches_a_column_by_any_path(store, monkeypatch):
    monkeypatch.setenv("TOOLPATH_TEST_API_KEY", KEY)
    register_secret(FILE_KEY)
    echoed = f"401 from server: headers {{'Authorization': 'Bearer {KEY}', 'x-api-key': '{FILE_KEY}'}}"
    url = f"http://user:{KEY}@models.internal:8000/v1"
    spec = f'{{"id": "t", "model": {{"name": "openai:m", "options": {{"api_key": "{KEY}", "base_url": "{url}"}}}}}}'
    rid = store.create_run(spec, "t", f"openai:m@{url}", "react")
    store.update_run(rid, status="failed", answer=f"the key is {FILE_KEY}", error=echoed)
    store.put_step(rid, 1, "policy", {"messages": [{"role": "assistant", "content": f"key={KEY}",
                                                     "tool_calls": [{"id": "c", "name": "fetch",
                                                                     "arguments": {"url": url, KEY: [FILE_KEY]}}]}],
                                      "error": echoed}, 0.0, 0.1, defer=True)
    store.commit_deferred(rid)
    e = store.create_eval("arith", f"openai:m@{url}", {"note": KEY}, 1)
    store.put_eval_sample(e, "s1", rid, "add", "failed", 0.0, 0, 0.1, {"error": echoed, "answer": FILE_KEY})
    store.finish_eval(e, {"score": 0.0, "errors": [echoed]})

    text = _all_text(store)
    assert KEY not in text and FILE_KEY not in text
    assert text.count(MARK) >= 10
    run = store.get_run(rid)
    assert run["error"].startswith("401 from server") and "models.internal:8000" in run["spec"]  # the rest is kept
    assert store.steps(rid)[0]["payload"]["messages"][0]["tool_calls"][0]["arguments"] == {
        "url": f"http://{MARK}@models.internal:8000/v1", MARK: [MARK]}


def test_an_artifact_copies_a_files_bytes_but_not_its_setuid_or_exec_bits(store, tmp_path):
    src = tmp_path / "rootpy"
    src.write_bytes(b"\x7fELF pretend this is a python binary")
    os.chmod(src, 0o7777)  # setuid, setgid, sticky, and every permission bit
    old_umask = os.umask(0)  # a permissive umask must not make artifacts writable by others either
    try:
        ref = store.put_artifact(src)
        again = store.put_artifact(b"other bytes", name="x.bin")
    finally:
        os.umask(old_umask)
    for path in (ref.path, again.path):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode == 0o644, f"{path}: mode {mode:o}"
    assert Path(ref.path).read_bytes() == src.read_bytes() and ref.size == src.stat().st_size
    assert not list(store.artifact_dir.glob(".incoming-*"))  # no temporary file left


def test_an_artifact_from_a_fifo_or_a_device_is_refused_not_read_forever(store, tmp_path):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    outcome: list = []

    def put(path):
        try:
            store.put_artifact(path)
        except ValueError as err:
            outcome.append(str(err))

    for path in (fifo, Path("/dev/zero")):
        worker = threading.Thread(target=put, args=(path,), daemon=True)
        worker.start()
        worker.join(60)  # a bound on a hang, not a timing assertion: reading either one would never end
        if worker.is_alive():
            with open(fifo, "wb"):  # let a blocked reader go, so the thread ends
                pass
            pytest.fail(f"put_artifact({path}) did not return")
    assert len(outcome) == 2 and all("not a regular file" in m for m in outcome)
    assert not list(store.artifact_dir.rglob("*.tmp"))

"""The run store: one SQLite file (WAL mode) holding runs, their steps, artifacts, evals and LangGraph checkpoints.

Layout under `$TOOLPATH_HOME` (default `~/.toolpath`):
    runs.db                 tables runs, steps, artifacts, evals, eval_samples + LangGraph's checkpoint tables
    artifacts/ab/abcdef…    files named by their SHA-256, so the same screenshot is stored once

Steps are keyed by (run_id, seq) and written with INSERT OR REPLACE: a node that was killed before its
checkpoint and runs again on resume overwrites its own row instead of adding a second one.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterable

from .state import ArtifactRef, Message

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    spec TEXT NOT NULL,
    model TEXT NOT NULL,
    agent TEXT NOT NULL,
    status TEXT NOT NULL,
    answer TEXT,
    error TEXT,
    score REAL,
    steps INTEGER NOT NULL DEFAULT 0,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    seconds REAL NOT NULL DEFAULT 0,
    eval_id TEXT,
    pid INTEGER,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    node TEXT NOT NULL,
    started REAL NOT NULL,
    seconds REAL NOT NULL,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    payload TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS artifacts (
    sha256 TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    mime TEXT NOT NULL,
    size INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS evals (
    id TEXT PRIMARY KEY,
    benchmark TEXT NOT NULL,
    model TEXT NOT NULL,
    params TEXT NOT NULL,
    n INTEGER NOT NULL,
    created REAL NOT NULL,
    finished REAL,
    summary TEXT
);
CREATE TABLE IF NOT EXISTS eval_samples (
    eval_id TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    run_id TEXT,
    category TEXT NOT NULL,
    status TEXT NOT NULL,
    score REAL NOT NULL,
    tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,
    detail TEXT,
    PRIMARY KEY (eval_id, sample_id)
);
"""

# Columns added after a table was first released: a store made by an older toolpath gets them on open.
_ADDED_COLUMNS = [("runs", "pid", "INTEGER")]

RUN_FIELDS = ("status", "answer", "error", "score", "steps", "tokens_in", "tokens_out", "seconds", "eval_id", "pid")


def default_home() -> Path:
    return Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath")


def new_id(prefix: str = "") -> str:
    # Time-ordered so `runs list` sorts naturally; the random tail keeps parallel runs apart.
    return f"{prefix}{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _shown(run: dict) -> dict:
    """A run whose process is gone while it was still running was interrupted: `toolpath resume` continues it."""
    if run["status"] == "running" and not _pid_alive(run.get("pid")):
        run["status"] = "interrupted"
    return run


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode: a commit survives the process being killed (kill -9), only not a power cut,
    # and it saves an fsync per step, which is most of a checkpoint's cost.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


class StoreError(RuntimeError):
    """The store cannot be opened: a TOOLPATH_DB that names no reachable PostgreSQL server, a bad URL."""


def _eval_row(row) -> dict:
    out = dict(row)
    out["params"] = json.loads(out["params"] or "{}")
    out["summary"] = json.loads(out["summary"]) if out.get("summary") else None
    return out


class Store:
    """All persistent state of toolpath. Safe to share between threads of one process.

    With `TOOLPATH_DB=postgresql://…` set, `Store(...)` gives a runs_pg.PostgresStore: the same tables and
    methods on a PostgreSQL server that several machines share (artifacts stay files under the home folder)."""

    def __new__(cls, *args, **kwargs):
        if cls is Store and os.environ.get("TOOLPATH_DB"):
            from .runs_pg import PostgresStore

            cls = PostgresStore
        return super().__new__(cls)

    def __init__(self, home: str | Path | None = None):
        self.home = Path(home) if home else default_home()
        self.home.mkdir(parents=True, exist_ok=True)
        self.artifact_dir = self.home / "artifacts"
        self.db_path = self.home / "runs.db"
        self._lock = threading.RLock()
        self._conn = _connect(self.db_path)
        self._conn.row_factory = sqlite3.Row
        with self._lock:
            self._conn.executescript(_SCHEMA)
            for table, column, decl in _ADDED_COLUMNS:
                have = {r[1] for r in self._conn.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
        self._saver = None
        # Statements that must become durable together with the run's next checkpoint (see StoreSaver).
        self._deferred: dict[str, list[tuple[str, tuple]]] = {}

    def close(self) -> None:
        with self._lock:
            if self._saver is not None:
                self._saver.conn.close()
                self._saver = None
            self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _exec(self, sql: str, args: Iterable[Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._conn.execute(sql, tuple(args))

    def _write(self, run_id: str, sql: str, args: tuple, defer: bool) -> None:
        if defer:
            with self._lock:
                self._deferred.setdefault(run_id, []).append((sql, args))
        else:
            self._exec(sql, args)

    def take_deferred(self, run_id: str) -> list[tuple[str, tuple]]:
        with self._lock:
            return self._deferred.pop(run_id, [])

    def commit_deferred(self, run_id: str) -> None:
        """Write the run's deferred statements now, in one transaction (runs without a StoreSaver)."""
        with self._lock:
            pending = self._deferred.pop(run_id, [])
            if not pending:
                return
            self._conn.execute("BEGIN")
            try:
                for sql, args in pending:
                    self._conn.execute(sql, args)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    # ---- runs -------------------------------------------------------------------------------------
    def create_run(self, spec_json: str, task_id: str, model: str, agent: str, run_id: str | None = None,
                   eval_id: str | None = None) -> str:
        run_id = run_id or new_id()
        now = time.time()
        self._exec("INSERT INTO runs (id, task_id, spec, model, agent, status, eval_id, pid, created, updated) "
                   "VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)",
                   (run_id, task_id, spec_json, model, agent, eval_id, os.getpid(), now, now))
        return run_id

    def update_run(self, run_id: str, defer: bool = False, **fields: Any) -> None:
        unknown = set(fields) - set(RUN_FIELDS)
        if unknown:
            raise ValueError(f"unknown run fields: {sorted(unknown)}")
        cols = ", ".join(f"{k} = ?" for k in fields)
        self._write(run_id, f"UPDATE runs SET {cols}, updated = ? WHERE id = ?", (*fields.values(), time.time(), run_id),
                    defer)

    def get_run(self, run_id: str) -> dict | None:
        row = self._exec("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _shown(dict(row)) if row else None

    def find_run(self, prefix: str) -> dict | None:
        """A run by its id or by a unique prefix of it, as git does for commits."""
        run = self.get_run(prefix)
        if run:
            return run
        rows = self._exec("SELECT id FROM runs WHERE id LIKE ? LIMIT 2", (prefix.replace("%", "") + "%",)).fetchall()
        return self.get_run(rows[0]["id"]) if len(rows) == 1 else None

    def list_runs(self, limit: int = 50, eval_id: str | None = None) -> list[dict]:
        if eval_id:
            rows = self._exec("SELECT * FROM runs WHERE eval_id = ? ORDER BY created DESC LIMIT ?", (eval_id, limit))
        else:
            rows = self._exec("SELECT * FROM runs ORDER BY created DESC LIMIT ?", (limit,))
        return [_shown(dict(r)) for r in rows.fetchall()]

    # ---- steps ------------------------------------------------------------------------------------
    def put_step(self, run_id: str, seq: int, node: str, payload: dict, started: float, seconds: float,
                 tokens_in: int = 0, tokens_out: int = 0, defer: bool = False) -> None:
        """Record one node execution. With `defer`, the row is committed in the same transaction as the run's
        next checkpoint, so a step is in the store exactly when LangGraph considers it done."""
        self._write(run_id, "INSERT OR REPLACE INTO steps (run_id, seq, node, started, seconds, tokens_in, tokens_out, "
                    "payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, seq, node, started, seconds, tokens_in, tokens_out, json.dumps(payload, ensure_ascii=False)),
                    defer)

    def steps(self, run_id: str, upto: int | None = None) -> list[dict]:
        sql = "SELECT * FROM steps WHERE run_id = ?" + (" AND seq <= ?" if upto is not None else "") + " ORDER BY seq"
        rows = self._exec(sql, (run_id,) if upto is None else (run_id, upto)).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            d["payload"] = json.loads(d["payload"])
            out.append(d)
        return out

    def drop_steps_after(self, run_id: str, seq: int) -> int:
        """Forget steps a killed process wrote after its last checkpoint; they will be run again."""
        return self._exec("DELETE FROM steps WHERE run_id = ? AND seq > ?", (run_id, seq)).rowcount

    def transcript(self, run_id: str, upto: int | None = None) -> list[Message]:
        """The conversation so far, rebuilt from the steps' recorded messages."""
        return [Message.model_validate(m) for s in self.steps(run_id, upto) for m in s["payload"].get("messages", [])]

    # ---- artifacts --------------------------------------------------------------------------------
    def put_artifact(self, data: bytes | str | Path, name: str = "", mime: str | None = None) -> ArtifactRef:
        """Keep bytes or a file under its SHA-256; storing the same content twice costs nothing."""
        if isinstance(data, (str, Path)):
            src = Path(data)
            raw = src.read_bytes()
            name = name or src.name
        else:
            raw = bytes(data)
        digest = hashlib.sha256(raw).hexdigest()
        mime = mime or (mimetypes.guess_type(name)[0] if name else None) or "application/octet-stream"
        ext = mimetypes.guess_extension(mime) or ""
        path = self.artifact_dir / digest[:2] / (digest + ext)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(path.suffix + f".{uuid.uuid4().hex[:6]}.tmp")
            tmp.write_bytes(raw)
            os.replace(tmp, path)  # atomic: a reader never sees half a file
        self._exec("INSERT OR IGNORE INTO artifacts (sha256, path, mime, size, created) VALUES (?, ?, ?, ?, ?)",
                   (digest, str(path), mime, len(raw), time.time()))
        return ArtifactRef(sha256=digest, path=str(path), mime=mime, name=name, size=len(raw))

    # ---- evals ------------------------------------------------------------------------------------
    def create_eval(self, benchmark: str, model: str, params: dict, n: int, eval_id: str | None = None) -> str:
        eval_id = eval_id or new_id("e")
        self._exec("INSERT INTO evals (id, benchmark, model, params, n, created) VALUES (?, ?, ?, ?, ?, ?)",
                   (eval_id, benchmark, model, json.dumps(params), n, time.time()))
        return eval_id

    def put_eval_sample(self, eval_id: str, sample_id: str, run_id: str | None, category: str, status: str,
                        score: float, tokens: int, seconds: float, detail: dict | None = None) -> None:
        self._exec("INSERT OR REPLACE INTO eval_samples (eval_id, sample_id, run_id, category, status, score, tokens, "
                   "seconds, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (eval_id, sample_id, run_id, category, status, score, tokens, seconds, json.dumps(detail or {})))

    def eval_samples(self, eval_id: str) -> list[dict]:
        rows = self._exec("SELECT * FROM eval_samples WHERE eval_id = ? ORDER BY rowid", (eval_id,)).fetchall()
        return [dict(r) for r in rows]

    def get_eval(self, eval_id: str) -> dict | None:
        """An eval's row with params and summary decoded, plus `done` (samples stored so far)."""
        row = self._exec("SELECT e.*, (SELECT COUNT(*) FROM eval_samples s WHERE s.eval_id = e.id) AS done "
                         "FROM evals e WHERE e.id = ?", (eval_id,)).fetchone()
        return _eval_row(row) if row else None

    def find_eval(self, prefix: str) -> dict | None:
        """An eval by its id or by a unique prefix of it."""
        found = self.get_eval(prefix)
        if found:
            return found
        rows = self._exec("SELECT id FROM evals WHERE id LIKE ? LIMIT 2", (prefix.replace("%", "") + "%",)).fetchall()
        return self.get_eval(rows[0]["id"]) if len(rows) == 1 else None

    def list_evals(self, limit: int = 50) -> list[dict]:
        """Evals, newest first, each as get_eval gives it."""
        rows = self._exec("SELECT e.*, (SELECT COUNT(*) FROM eval_samples s WHERE s.eval_id = e.id) AS done "
                          "FROM evals e ORDER BY e.created DESC LIMIT ?", (limit,)).fetchall()
        return [_eval_row(r) for r in rows]

    def finish_eval(self, eval_id: str, summary: dict) -> None:
        self._exec("UPDATE evals SET finished = ?, summary = ? WHERE id = ?", (time.time(), json.dumps(summary), eval_id))

    # ---- checkpoints ------------------------------------------------------------------------------
    def checkpointer(self):
        """LangGraph's SqliteSaver on this same database file (its own connection, same WAL settings)."""
        if self._saver is None:
            self._saver = _store_saver(self)
            self._saver.setup()
        return self._saver

    def prune_checkpoints(self, run_id: str) -> None:
        """Keep only a finished run's last checkpoint: its steps table already holds the whole history."""
        saver = self.checkpointer()
        saver.forget(run_id)
        with saver.lock:
            conn = saver.conn
            last = conn.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id DESC "
                                "LIMIT 1", (run_id,)).fetchone()
            if last:
                conn.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id != ?", (run_id, last[0]))
                conn.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id != ?", (run_id, last[0]))


class DurableCommits:
    """What our LangGraph checkpointers (StoreSaver here, runs_pg's on PostgreSQL) add to the stock saver:
    `put` commits the run's deferred step rows with the checkpoint in one transaction (the backend's own
    `_transaction`), ordinary channel writes are not stored, and nodes can wait for the previous step's commit.
    Listed before the stock saver class, so its put/put_writes wrap the stock ones."""

    commits_store_steps = True

    def __init__(self, conn):
        super().__init__(conn)
        self.lock = threading.RLock()  # re-entered: put() holds it while the stock methods take it again
        self._batch = False
        self._durable = threading.Condition()
        self._durable_seq: dict[str, int] = {}
        self._failed: dict[str, BaseException] = {}

    def mark_durable(self, thread_id: str, seq: int) -> None:
        """Record that the run's state up to node `seq` is committed (a resumed run starts so)."""
        with self._durable:
            if seq > self._durable_seq.get(thread_id, -1):
                self._durable_seq[thread_id] = seq
            self._failed.pop(thread_id, None)  # a later commit (or a resume) supersedes an earlier failure
            self._durable.notify_all()

    def forget(self, thread_id: str) -> None:
        """Drop what is kept in memory for a finished run (an eval runs thousands in one process)."""
        with self._durable:
            self._durable_seq.pop(thread_id, None)
            self._failed.pop(thread_id, None)

    def wait_durable(self, thread_id: str, seq: int, timeout: float = 120.0) -> None:
        """Block until the checkpoint holding node `seq` is committed.

        Nodes call this before they do anything, so with LangGraph's durability="async" (the checkpoint is
        written on a background thread while the loop prepares the next step) no node acts on a step that
        is not yet on disk: a kill -9 loses exactly what it loses with durability="sync", at lower cost.
        """
        with self._durable:
            ok = self._durable.wait_for(
                lambda: self._durable_seq.get(thread_id, -1) >= seq or thread_id in self._failed, timeout)
            if thread_id in self._failed:
                raise RuntimeError(f"checkpoint write failed: {self._failed[thread_id]}")
            if not ok:
                raise TimeoutError(f"checkpoint of step {seq} was not written within {timeout:g} s")

    def put_writes(self, config, writes, task_id, task_path=""):
        thread_id = str(config["configurable"]["thread_id"])
        special = [(channel, value) for channel, value in writes if channel.startswith("__")]
        if special:
            with self._transaction(thread_id):
                super().put_writes(config, special, task_id, task_path)

    def put(self, config, checkpoint, metadata, new_versions):
        thread_id = str(config["configurable"]["thread_id"])
        try:
            with self._transaction(thread_id):
                out = super().put(config, checkpoint, metadata, new_versions)
        except BaseException as err:
            with self._durable:
                self._failed[thread_id] = err
                self._durable.notify_all()
            raise
        seq = (checkpoint.get("channel_values") or {}).get("seq")
        if isinstance(seq, int):
            self.mark_durable(thread_id, seq)
        return out


def _store_saver(store: Store):
    """LangGraph's SqliteSaver, made to commit once per superstep, together with the run's own step rows.

    Stock, it commits the node's channel writes and then the checkpoint: two transactions per node. Here `put`
    commits, in one transaction, the deferred step rows and run update and the checkpoint. A kill before that
    commit leaves neither, and the node runs again on resume; a kill after it leaves both.

    Ordinary channel writes are not stored at all. LangGraph keeps them to finish a superstep of several
    parallel tasks after a crash; our supersteps have one task, whose writes the very next checkpoint holds
    applied, so storing them would only double every step's cost. Writes of LangGraph's own channels
    (errors, interrupts: `__…__`) are committed at once, as stock, with the steps deferred so far.
    """
    from contextlib import contextmanager

    from langgraph.checkpoint.sqlite import SqliteSaver

    class StoreSaver(DurableCommits, SqliteSaver):
        @contextmanager
        def cursor(self, transaction: bool = True):
            with self.lock:
                self.setup()
                cur = self.conn.cursor()
                try:
                    yield cur
                finally:
                    if transaction and not self._batch:
                        self.conn.commit()
                    cur.close()

        @contextmanager
        def _transaction(self, thread_id: str):
            with self.lock:
                self.setup()
                self.conn.execute("BEGIN IMMEDIATE")
                self._batch = True
                try:
                    for sql, args in store.take_deferred(thread_id):
                        self.conn.execute(sql, args)
                    yield
                    self.conn.execute("COMMIT")
                except BaseException:
                    self.conn.execute("ROLLBACK")
                    raise
                finally:
                    self._batch = False

    return StoreSaver(_connect(store.db_path))

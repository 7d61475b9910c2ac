"""The run store on SQLite: one file (WAL mode) holding runs, their steps, artifacts, evals and LangGraph
checkpoints, under `$TOOLPATH_HOME` (default `~/.toolpath`):
    runs.db                 tables runs, steps, artifacts, evals, eval_samples + LangGraph's checkpoint tables
    artifacts/ab/abcdef…    files named by their SHA-256, so the same screenshot is stored once

Steps are keyed by (run_id, seq) and written with INSERT OR REPLACE: a node that was killed before its
checkpoint and runs again on resume overwrites its own row instead of adding a second one.

Every text and JSON document the store writes first goes through `clean_text` / `to_json` (runs/clean.py):
strict JSON, valid text, no secrets, whatever a model produced. `Store(home, readonly=True)` opens the store for
reading only (a read-only home, a reader that must never take a write lock).
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..paths import home as default_home
from ..state import ArtifactRef, Message
from .clean import clean_text, finite_or, json_text, to_json, valid_text
from .common import StoreError, new_id, pid_alive
from .durable import DurableCommits
from .schema import ADDED_COLUMNS, ADDED_INDEXES, RUN_FIELDS, SCHEMA


def _shown(run: dict) -> dict:
    """A run whose process is gone while it was still running was interrupted: `toolpath resume` continues it."""
    if run["status"] == "running" and not pid_alive(run.get("pid")):
        run["status"] = "interrupted"
    return run


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30.0, isolation_level=None)
    # Switching a new file to WAL while another process does the same fails at once with "database is locked"
    # (SQLite does not wait on its busy handler there): processes that create a store together retry.
    deadline = time.monotonic() + 30.0
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    # NORMAL in WAL mode: a commit survives the process being killed (kill -9), only not a power cut,
    # and it saves an fsync per step, which is most of a checkpoint's cost.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _connect_readonly(path: Path) -> sqlite3.Connection | None:
    """A connection that cannot write to the store at `path`, or None when there is no store there yet.

    mode=ro first: it sees what writers commit as they commit it. In WAL mode it needs the -shm file to exist
    or to be creatable, so in a read-only folder that a writer closed cleanly it fails; then immutable=1, which
    reads the database file alone: right there, since nobody can write into that folder either."""
    if not path.is_file():
        return None
    uri = "file:" + urllib.parse.quote(str(path.resolve()))
    for mode in ("mode=ro", "immutable=1"):
        conn = sqlite3.connect(f"{uri}?{mode}", uri=True, check_same_thread=False, timeout=30.0, isolation_level=None)
        try:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchall()
        except sqlite3.OperationalError:
            conn.close()
            if mode == "immutable=1":
                raise
            continue
        if not tables:  # a writer is creating the store right now: not one to read yet
            conn.close()
            return None
        conn.execute("PRAGMA busy_timeout=30000")
        return conn
    return None


def _empty_store() -> sqlite3.Connection:
    """What a reader sees where no store exists yet: the tables, empty, in memory."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    conn.executescript(SCHEMA)
    _add_columns(conn)
    return conn


def _add_columns(conn: sqlite3.Connection) -> None:
    """Give a store made by an older toolpath the columns added since. Checked and added in one write
    transaction: processes that open the same old store together would otherwise both see a column missing
    and the second ALTER TABLE would fail ("duplicate column name")."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table, column, decl in ADDED_COLUMNS:
            if column not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
        for sql in ADDED_INDEXES:
            conn.execute(sql)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _write_new_file(path: Path, chunks: Iterable[bytes]) -> tuple[str, int]:
    """Write `chunks` to a new file of mode 0644 (whatever the umask); return their SHA-256 and size."""
    digest, size = hashlib.sha256(), 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), 0o644)
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    return digest.hexdigest(), size


def _copy_regular_file(src: Path, dst: Path) -> tuple[str, int]:
    """Copy a regular file's bytes (not its mode) into a new file `dst`, a megabyte at a time."""
    fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))  # O_NONBLOCK: a FIFO opens
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError(f"{src}: not a regular file (only a file's content can be stored as an artifact)")
        return _write_new_file(dst, iter(lambda: f.read(1 << 20), b""))


def _run_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """update_run's values as the store writes them: texts cleaned, numbers finite."""
    out = dict(fields)
    for k in ("answer", "error"):
        if k in out:
            out[k] = clean_text(out[k])
    for k, default in (("score", None), ("seconds", 0.0)):
        if k in out:
            out[k] = finite_or(out[k], default)
    return out


def _eval_row(row) -> dict:
    out = dict(row)
    out["params"] = json.loads(out["params"] or "{}")
    out["summary"] = json.loads(out["summary"]) if out.get("summary") else None
    return out
class Store:
    """All persistent state of toolpath. Safe to share between threads of one process.

    This is the SQLite store under the home folder; `open_store()` gives the PostgreSQL one instead when
    TOOLPATH_DB is set (runs/postgres.py: the same tables and methods on a server several machines share)."""

    def __init__(self, home: str | Path | None = None, readonly: bool = False):
        """`readonly`: never write (no folder, table or WAL file is created, a write raises StoreError); what
        reading commands use, so they work on a home they cannot write. With no store there yet, it reads as
        empty until one appears."""
        self.home = Path(home) if home else default_home()
        self.artifact_dir = self.home / "artifacts"
        self.db_path = self._location()
        self.readonly = readonly
        self._empty = False  # a read-only store of a home with no store yet (reads as empty until there is one)
        self._lock = threading.RLock()
        self._saver = None
        # Statements that must become durable together with the run's next checkpoint (see StoreSaver).
        self._deferred: dict[str, list[tuple[str, tuple]]] = {}
        self._conn = self._open_readonly() if readonly else self._open_writable()

    def _location(self):
        """Where the store is, as messages name it ("no run … in {store.db_path}")."""
        return self.home / "runs.db"

    def _open_writable(self) -> sqlite3.Connection:
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            conn = _connect(self.db_path)
            conn.row_factory = sqlite3.Row
            conn.executescript(SCHEMA)
            _add_columns(conn)
        except (PermissionError, sqlite3.OperationalError) as err:
            raise StoreError(f"cannot open the run store {self.db_path} for writing: {err} (commands that only "
                             "read it, such as runs list, runs show, view and report, open it read-only)") from None
        return conn

    def _open_readonly(self) -> sqlite3.Connection:
        conn = _connect_readonly(self.db_path)
        self._empty = conn is None  # then an empty store in memory, until the file exists (see _exec)
        conn = conn or _empty_store()
        conn.row_factory = sqlite3.Row
        return conn

    def _check_writable(self, what: str) -> None:
        if self.readonly:
            raise StoreError(f"the run store {self.db_path} was opened read-only: cannot {what}")

    def close(self) -> None:
        with self._lock:
            if self._saver is not None:
                self._saver.conn.close()
                self._saver = None
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _exec(self, sql: str, args: Iterable[Any] = ()) -> sqlite3.Cursor:
        if self.readonly:
            if not sql.lstrip().upper().startswith("SELECT"):
                self._check_writable("write to it")
            if self._empty and self.db_path.is_file():
                self._reopen_readonly()
        with self._lock:
            return self._conn.execute(sql, tuple(args))

    def _reopen_readonly(self) -> None:
        with self._lock:
            conn = _connect_readonly(self.db_path)
            if conn is not None:
                conn.row_factory = sqlite3.Row
                self._conn.close()
                self._conn, self._empty = conn, False

    def read_connection(self) -> sqlite3.Connection:
        """A new SQLite connection that can only read this store, for a reader's own thread (the viewer).
        With no store yet, an empty one in memory."""
        conn = _connect_readonly(self.db_path) or _empty_store()
        conn.row_factory = sqlite3.Row
        return conn

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
            self._check_writable("write to it")
            with self._one_transaction():
                for sql, args in pending:
                    self._conn.execute(self._dialect(sql), args)

    @contextmanager
    def _one_transaction(self):
        """One transaction on the store's own connection (lock held by the caller)."""
        self._conn.execute("BEGIN")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _dialect(sql: str) -> str:
        """A statement as this backend's server reads it (the statements here are written for SQLite)."""
        return sql

    # ---- runs -------------------------------------------------------------------------------------
    def create_run(self, spec_json: str, task_id: str, model: str, agent: str, run_id: str | None = None,
                   eval_id: str | None = None, parent: tuple[str, int] | None = None) -> str:
        """A new run, 'running' in this process; `parent` (run id, step seq) makes it a nested run of that step."""
        run_id = run_id or new_id()
        now = time.time()
        parent_id, parent_seq = parent or (None, None)
        self._exec("INSERT INTO runs (id, task_id, spec, model, agent, status, eval_id, pid, created, updated, "
                   "parent_id, parent_seq) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                   (run_id, valid_text(task_id), json_text(spec_json), clean_text(model), valid_text(agent),
                    eval_id, os.getpid(), now, now, parent_id, parent_seq))
        return run_id

    def has_nesting(self) -> bool:
        """Whether the runs table has the nesting columns (a store an older toolpath made, opened read-only,
        has not: it holds no nested runs)."""
        cur = self._exec("SELECT * FROM runs LIMIT 0")
        return "parent_id" in {d[0] for d in cur.description}

    def child_runs(self, run_id: str) -> list[dict]:
        """The nested runs the steps of `run_id` started, in the order they started."""
        if not self.has_nesting():
            return []
        rows = self._exec("SELECT * FROM runs WHERE parent_id = ? ORDER BY parent_seq, created", (run_id,))
        return [self._show(r) for r in rows.fetchall()]

    def update_run(self, run_id: str, defer: bool = False, **fields: Any) -> None:
        unknown = set(fields) - set(RUN_FIELDS)
        if unknown:
            raise ValueError(f"unknown run fields: {sorted(unknown)}")
        fields = _run_fields(fields)
        cols = ", ".join(f"{k} = ?" for k in fields)
        self._write(run_id, f"UPDATE runs SET {cols}, updated = ? WHERE id = ?",
                    (*fields.values(), time.time(), run_id), defer)

    def _show(self, row) -> dict:
        """A runs row as callers see it (a dead 'running' run as interrupted: see _shown)."""
        return _shown(dict(row))

    def abandon_run(self, run_id: str, why: str) -> None:
        """Mark a run that nothing will continue or count (an eval's sample ran, or was stored, without it):
        status 'abandoned', with why in its error."""
        self.update_run(run_id, status="abandoned", error=why)

    def get_run(self, run_id: str) -> dict | None:
        row = self._exec("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return self._show(row) if row else None

    def find_run(self, prefix: str) -> dict | None:
        """A run by its id or by a unique prefix of it, as git does for commits."""
        run = self.get_run(prefix)
        if run:
            return run
        # A prefix names a top-level run (its nested runs' ids start with its own); a nested one needs its full id.
        top = " AND parent_id IS NULL" if self.has_nesting() else ""
        rows = self._exec(f"SELECT id FROM runs WHERE id LIKE ?{top} LIMIT 2",
                          (prefix.replace("%", "") + "%",)).fetchall()
        return self.get_run(rows[0]["id"]) if len(rows) == 1 else None

    def list_runs(self, limit: int = 50, eval_id: str | None = None) -> list[dict]:
        if eval_id:
            rows = self._exec("SELECT * FROM runs WHERE eval_id = ? ORDER BY created DESC LIMIT ?", (eval_id, limit))
        else:
            # Nested runs show under their parent (runs show), not as runs of their own.
            top = "WHERE parent_id IS NULL" if self.has_nesting() else ""
            rows = self._exec(f"SELECT * FROM runs {top} ORDER BY created DESC LIMIT ?", (limit,))
        return [self._show(r) for r in rows.fetchall()]

    def unclaimed_runs(self, eval_id: str) -> list[dict]:
        """Runs of the eval that no sample row refers to, oldest first: left by a killed eval or worker, or by
        a sample stopped at its time limit. The eval runner adopts or abandons them (evals/runner.py)."""
        rows = self._exec("SELECT * FROM runs r WHERE r.eval_id = ? AND NOT EXISTS (SELECT 1 FROM eval_samples s "
                          "WHERE s.eval_id = r.eval_id AND s.run_id = r.id) ORDER BY r.created, r.id", (eval_id,))
        return [self._show(r) for r in rows.fetchall()]

    # ---- steps ------------------------------------------------------------------------------------
    def put_step(self, run_id: str, seq: int, node: str, payload: dict, started: float, seconds: float,
                 tokens_in: int = 0, tokens_out: int = 0, defer: bool = False) -> None:
        """Record one node execution. With `defer`, the row is committed in the same transaction as the run's
        next checkpoint, so a step is in the store exactly when LangGraph considers it done."""
        self._write(run_id, "INSERT OR REPLACE INTO steps (run_id, seq, node, started, seconds, tokens_in, tokens_out, "
                    "payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, seq, valid_text(node), started, seconds, tokens_in, tokens_out, to_json(payload)), defer)

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
        """Keep bytes or a file under its SHA-256; storing the same content twice costs nothing.

        A file's content is copied, never its mode: the copy is 0644 whatever the source was (code in a sandbox
        may leave a setuid or executable file behind), and only a regular file is read (a FIFO would block, a
        device would never end)."""
        self._check_writable("store an artifact")
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.artifact_dir / f".incoming-{uuid.uuid4().hex}.tmp"
        try:
            if isinstance(data, (str, os.PathLike)):
                name = name or Path(data).name
                digest, size = _copy_regular_file(Path(data), tmp)
            else:
                digest, size = _write_new_file(tmp, [bytes(data)])
            mime = mime or (mimetypes.guess_type(name)[0] if name else None) or "application/octet-stream"
            path = self.artifact_dir / digest[:2] / (digest + (mimetypes.guess_extension(mime) or ""))
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, path)  # atomic: a reader never sees half a file
        finally:
            tmp.unlink(missing_ok=True)
        self._exec("INSERT OR IGNORE INTO artifacts (sha256, path, mime, size, created) VALUES (?, ?, ?, ?, ?)",
                   (digest, str(path), mime, size, time.time()))
        return ArtifactRef(sha256=digest, path=str(path), mime=mime, name=name, size=size)

    # ---- evals ------------------------------------------------------------------------------------
    def create_eval(self, benchmark: str, model: str, params: dict, n: int, eval_id: str | None = None) -> str:
        eval_id = eval_id or new_id("e")
        self._exec("INSERT INTO evals (id, benchmark, model, params, n, created) VALUES (?, ?, ?, ?, ?, ?)",
                   (eval_id, valid_text(benchmark), clean_text(model), to_json(params), n, time.time()))
        return eval_id

    def put_eval_sample(self, eval_id: str, sample_id: str, run_id: str | None, category: str, status: str,
                        score: float, tokens: int, seconds: float, detail: dict | None = None) -> None:
        self._exec("INSERT OR REPLACE INTO eval_samples (eval_id, sample_id, run_id, category, status, score, tokens, "
                   "seconds, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (eval_id, valid_text(sample_id), run_id, valid_text(category), valid_text(status),
                    finite_or(score, 0.0), tokens, finite_or(seconds, 0.0), to_json(detail or {})))

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
        self._exec("UPDATE evals SET finished = ?, summary = ? WHERE id = ?", (time.time(), to_json(summary), eval_id))

    # ---- checkpoints ------------------------------------------------------------------------------
    def checkpointer(self):
        """LangGraph's SqliteSaver on this same database file (its own connection, same WAL settings)."""
        self._check_writable("checkpoint a run")
        if self._saver is None:
            self._saver = self._new_saver()
            self._saver.setup()
        return self._saver

    def _new_saver(self):
        return _store_saver(self)

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


"""The run store: one SQLite file (WAL mode) holding runs, their steps, artifacts, evals and LangGraph checkpoints.

Layout under `$TOOLPATH_HOME` (default `~/.toolpath`):
    runs.db                 tables runs, steps, artifacts, evals, eval_samples + LangGraph's checkpoint tables
    artifacts/ab/abcdef…    files named by their SHA-256, so the same screenshot is stored once

Steps are keyed by (run_id, seq) and written with INSERT OR REPLACE: a node that was killed before its
checkpoint and runs again on resume overwrites its own row instead of adding a second one.

Every text and JSON document the store writes first goes through `clean_text` / `to_json` (see "What the store
writes" below): strict JSON, valid text, no secrets, whatever a model produced. `Store(home, readonly=True)` opens
the store for reading only (a read-only home, a reader that must never take a write lock).
"""

from __future__ import annotations

import hashlib
import json
import math
import mimetypes
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable

from .redact import redactor
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
CREATE INDEX IF NOT EXISTS runs_eval ON runs(eval_id);
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


# ---- what the store writes ---------------------------------------------------------------------------------
# Whatever a model produced, a write must neither fail (that would lose the step, or fail the checkpoint the
# step commits with) nor store something its readers reject: the viewer's browser and `runs show --json` parse
# strict JSON, PostgreSQL and every UTF-8 reader refuse invalid text. So before anything is written:
#   - a float that is not finite (NaN, Infinity) becomes null, as JavaScript's JSON.stringify writes it: JSON
#     has no such numbers, and a string in their place would break code that expects a number there;
#   - a lone surrogate (half a UTF-16 pair: UTF-8 cannot encode it) or a NUL (PostgreSQL text cannot hold it)
#     becomes U+FFFD, the replacement character; a well-formed surrogate pair becomes its character;
#   - a value JSON has no type for (bytes, a complex number, a set, any object) becomes its repr(), a path its
#     text, and nesting deeper than MAX_DEPTH a note saying so (deeper, json.dumps itself would recurse out);
#   - every secret toolpath.redact knows is replaced by its mark, whatever path it reached the store by; only
#     identifiers (ids, names of tasks, samples, nodes) are not redacted, as they must read back as written.

MAX_DEPTH = 100
_BAD_TEXT = {0: "\ufffd"}  # str.translate table for NUL; surrogates are handled by the UTF-16 round trip


def _valid_text(text: str) -> str:
    if not isinstance(text, str):
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # surrogates: pairs become their character, lone halves U+FFFD
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.translate(_BAD_TEXT) if "\x00" in text else text


def clean_text(text: Any, redact_text: Callable[[str], str] | None = None) -> str | None:
    """A text column's value as the store writes it: valid text, secrets redacted (None stays None)."""
    if text is None:
        return None
    return (redact_text or redactor())(_valid_text(text if isinstance(text, str) else str(text)))


def clean_data(value: Any, redact_text: Callable[[str], str] | None = None, depth: int = 0) -> Any:
    """`value` made of JSON types only, with the rules above applied to every string and number in it."""
    redact_text = redact_text or redactor()
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return clean_text(value, redact_text)
    if depth >= MAX_DEPTH:
        return f"[nested deeper than {MAX_DEPTH} levels: not stored]"
    if isinstance(value, dict):
        return {_clean_key(k, redact_text): clean_data(v, redact_text, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_data(v, redact_text, depth + 1) for v in value]
    if isinstance(value, os.PathLike):
        return clean_text(os.fspath(value), redact_text)
    return clean_text(_repr(value), redact_text)


def _clean_key(key: Any, redact_text: Callable[[str], str]) -> str:
    return clean_text(key if isinstance(key, str) else _repr(key), redact_text)


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as err:  # noqa: BLE001 — an object whose repr fails is still stored, as what it is
        return f"<{type(value).__name__} object: repr failed with {type(err).__name__}>"


def to_json(value: Any, compact: bool = False) -> str:
    """`value` as the strict JSON text the store writes (clean_data's rules; never NaN, never a failure)."""
    return json.dumps(clean_data(value), ensure_ascii=False, allow_nan=False,
                      separators=(",", ":") if compact else None)


def _json_text(text: str) -> str:
    """A JSON document given as text (a run's spec), cleaned by the same rules, or as text if it is not JSON."""
    try:
        return to_json(json.loads(text), compact=True)
    except (ValueError, RecursionError):
        return clean_text(text)


def _number(x: Any, default: float | None) -> float | None:
    return x if x is None or (isinstance(x, (int, float)) and math.isfinite(x)) else default


def default_home() -> Path:
    return Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath")


def new_id(prefix: str = "") -> str:
    # Time-ordered so `runs list` sorts naturally; the random tail keeps parallel runs apart.
    return f"{prefix}{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def pid_alive(pid: int | None) -> bool:
    """Whether process `pid` of this machine is running (a zombie is not: it has exited)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """An exited process its parent has not collected yet runs nothing. An orphan's new parent may never
    collect it (pid 1 of a container that is not an init), so it would look alive forever."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):  # no /proc (not Linux): as os.kill said, alive
        return False


def _shown(run: dict) -> dict:
    """A run whose process is gone while it was still running was interrupted: `toolpath resume` continues it."""
    if run["status"] == "running" and not pid_alive(run.get("pid")):
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
    conn.executescript(_SCHEMA)
    return conn


class StoreError(RuntimeError):
    """The store cannot be opened (a TOOLPATH_DB that names no reachable PostgreSQL server, a bad URL, a home
    that cannot be written), or a write was asked of a store opened read-only."""


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
            out[k] = _number(out[k], default)
    return out


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

    def __init__(self, home: str | Path | None = None, readonly: bool = False):
        """`readonly`: never write (no folder, table or WAL file is created, a write raises StoreError); what
        reading commands use, so they work on a home they cannot write. With no store there yet, it reads as
        empty until one appears."""
        self.home = Path(home) if home else default_home()
        self.artifact_dir = self.home / "artifacts"
        self.db_path = self.home / "runs.db"
        self.readonly = readonly
        self._empty = False  # a read-only store of a home with no store yet (reads as empty until there is one)
        self._lock = threading.RLock()
        self._saver = None
        # Statements that must become durable together with the run's next checkpoint (see StoreSaver).
        self._deferred: dict[str, list[tuple[str, tuple]]] = {}
        self._conn = self._open_readonly() if readonly else self._open_writable()

    def _open_writable(self) -> sqlite3.Connection:
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            conn = _connect(self.db_path)
            conn.row_factory = sqlite3.Row
            conn.executescript(_SCHEMA)
            for table, column, decl in _ADDED_COLUMNS:
                have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
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

    def __enter__(self) -> "Store":
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
                   (run_id, _valid_text(task_id), _json_text(spec_json), clean_text(model), _valid_text(agent),
                    eval_id, os.getpid(), now, now))
        return run_id

    def update_run(self, run_id: str, defer: bool = False, **fields: Any) -> None:
        unknown = set(fields) - set(RUN_FIELDS)
        if unknown:
            raise ValueError(f"unknown run fields: {sorted(unknown)}")
        fields = _run_fields(fields)
        cols = ", ".join(f"{k} = ?" for k in fields)
        self._write(run_id, f"UPDATE runs SET {cols}, updated = ? WHERE id = ?", (*fields.values(), time.time(), run_id),
                    defer)

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
        rows = self._exec("SELECT id FROM runs WHERE id LIKE ? LIMIT 2", (prefix.replace("%", "") + "%",)).fetchall()
        return self.get_run(rows[0]["id"]) if len(rows) == 1 else None

    def list_runs(self, limit: int = 50, eval_id: str | None = None) -> list[dict]:
        if eval_id:
            rows = self._exec("SELECT * FROM runs WHERE eval_id = ? ORDER BY created DESC LIMIT ?", (eval_id, limit))
        else:
            rows = self._exec("SELECT * FROM runs ORDER BY created DESC LIMIT ?", (limit,))
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
                    (run_id, seq, _valid_text(node), started, seconds, tokens_in, tokens_out, to_json(payload)), defer)

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
                   (eval_id, _valid_text(benchmark), clean_text(model), to_json(params), n, time.time()))
        return eval_id

    def put_eval_sample(self, eval_id: str, sample_id: str, run_id: str | None, category: str, status: str,
                        score: float, tokens: int, seconds: float, detail: dict | None = None) -> None:
        self._exec("INSERT OR REPLACE INTO eval_samples (eval_id, sample_id, run_id, category, status, score, tokens, "
                   "seconds, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (eval_id, _valid_text(sample_id), run_id, _valid_text(category), _valid_text(status),
                    _number(score, 0.0), tokens, _number(seconds, 0.0), to_json(detail or {})))

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

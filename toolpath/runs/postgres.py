"""The run store on PostgreSQL, for several machines writing one store: `TOOLPATH_DB=postgresql://user@host/db`.

`open_store()` gives a PostgresStore when TOOLPATH_DB is set, so the CLI, episodes and eval worker processes
(which inherit the environment) all use it with no change. It is the SQLite Store with three things replaced:

- the connection: psycopg 3, autocommit (one statement, one commit, as the SQLite store's isolation_level=None);
- the SQL dialect: the base class's statements are translated once each (`_pg`): `?` → `%s`, and
  `INSERT OR REPLACE/IGNORE` → `INSERT … ON CONFLICT (primary key) DO UPDATE/NOTHING`, LIKE → ILIKE;
- the checkpointer: LangGraph's PostgresSaver, made to commit the run's deferred step rows together with each
  checkpoint, exactly as sqlite.StoreSaver does for SqliteSaver (see there for why).

The tables are the SQLite ones with PostgreSQL types (REAL → DOUBLE PRECISION, INTEGER → BIGINT), plus two
columns: eval_samples.rowid (BIGSERIAL, renewed on every replace) so `ORDER BY rowid` keeps SQLite's order (the
order samples were last written), and runs.host (the machine of the run's pid: a run still running on another
machine is not shown as interrupted here, see PostgresStore._elsewhere). LangGraph's own tables (checkpoints,
checkpoint_blobs, checkpoint_writes, checkpoint_migrations) sit next to them in the same database. Artifacts stay
files under the home folder (`$TOOLPATH_HOME/artifacts`); the artifacts table records their paths, so machines
sharing a store should share that folder too (or each keeps the files it made).
"""

from __future__ import annotations

import os
import re
import socket
import time
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from .common import StoreError
from .durable import DurableCommits
from .schema import ADDED_COLUMNS, ADDED_INDEXES, SCHEMA
from .sqlite import Store

SCHEMES = ("postgresql://", "postgres://")
HOST = socket.gethostname()
_LOCK_KEY = 0x746F6F6C  # advisory lock held while creating tables, so processes starting together do not race

_KEYS = {"steps": ("run_id", "seq"), "eval_samples": ("eval_id", "sample_id"), "artifacts": ("sha256",)}
_RENEWED = {"eval_samples": "rowid = DEFAULT"}  # SQLite's REPLACE gives the row a new rowid; so does this
_INSERT = re.compile(r"INSERT OR (REPLACE|IGNORE) INTO (\w+) \(([^)]*)\)(.*)", re.S)


def _schema() -> str:
    sql = re.sub(r"\bREAL\b", "DOUBLE PRECISION", SCHEMA)
    sql = re.sub(r"\bINTEGER\b", "BIGINT", sql)
    return sql.replace("CREATE TABLE IF NOT EXISTS eval_samples (\n",
                       "CREATE TABLE IF NOT EXISTS eval_samples (\n    rowid BIGSERIAL,\n")


@cache
def _pg(sql: str) -> str:
    """A statement of the SQLite Store in PostgreSQL's dialect."""
    m = _INSERT.match(sql)
    if m:
        verb, table, cols, rest = m.groups()
        key = _KEYS[table]
        if verb == "IGNORE":
            tail = f" ON CONFLICT ({', '.join(key)}) DO NOTHING"
        else:
            sets = [f"{c} = EXCLUDED.{c}" for c in (c.strip() for c in cols.split(",")) if c not in key]
            sets += [_RENEWED[table]] if table in _RENEWED else []
            tail = f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {', '.join(sets)}"
        sql = f"INSERT INTO {table} ({cols}){rest}{tail}"
    return sql.replace(" LIKE ", " ILIKE ").replace("?", "%s")  # SQLite's LIKE ignores ASCII case


def _masked(url: str) -> str:
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def connect(url: str):
    """A psycopg connection (autocommit, rows as dicts) to TOOLPATH_DB, or a StoreError naming it and the host."""
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
        from psycopg.rows import dict_row
    except ImportError as err:
        raise StoreError(f"TOOLPATH_DB is set to a PostgreSQL URL but psycopg is not installed ({err}); "
                         "pip install 'psycopg[binary]' langgraph-checkpoint-postgres") from None
    if not url.startswith(SCHEMES):
        raise StoreError(f"TOOLPATH_DB={_masked(url)!r}: expected a PostgreSQL URL, postgresql://USER@HOST[:PORT]/DB "
                         "(unset it to use the SQLite store under TOOLPATH_HOME)")
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error as err:
        raise StoreError(f"TOOLPATH_DB={_masked(url)!r} is not a valid PostgreSQL URL: {err}") from None
    host = info.get("host") or info.get("hostaddr") or "localhost"
    where = f"host {host}" + (f" port {info['port']}" if info.get("port") else "") + \
        (f", database {info['dbname']}" if info.get("dbname") else "")
    extra = {} if "connect_timeout" in info else {"connect_timeout": 10}
    try:
        return psycopg.connect(url, autocommit=True, row_factory=dict_row, **extra)
    except psycopg.Error as err:
        detail = " ".join(str(err).split())
        raise StoreError(f"TOOLPATH_DB={_masked(url)!r}: cannot connect to PostgreSQL on {where}: {detail}") from None


@contextmanager
def _setup_lock(conn, what: str, timeout: float = 120.0):
    """One process at a time creates tables or runs LangGraph's migrations. Waiters poll with try-lock rather
    than block: a blocked statement holds a snapshot, which LangGraph's CREATE INDEX CONCURRENTLY in the
    holder would wait for (a deadlock)."""
    deadline = time.monotonic() + timeout
    while not conn.execute("SELECT pg_try_advisory_lock(%s) AS ok", (_LOCK_KEY,)).fetchone()["ok"]:
        if time.monotonic() > deadline:
            raise StoreError(f"TOOLPATH_DB: another process has held the setup lock for {timeout:g} s ({what})")
        time.sleep(0.05)
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))


class PostgresStore(Store):
    """The SQLite Store's tables and methods on PostgreSQL. Safe to share between threads of one process; any
    number of processes and machines may write one database at once (each statement or deferred batch is its own
    transaction)."""

    def __init__(self, home: str | Path | None = None, url: str | None = None, readonly: bool = False):
        self.url = url or os.environ.get("TOOLPATH_DB", "")
        super().__init__(home, readonly)

    def _location(self) -> str:
        return _masked(self.url)

    def _open_readonly(self):
        """Every statement of this session read-only (the server refuses a write), and no table created: a store
        that does not exist yet is an error naming the database, not an empty one made for reading."""
        conn = connect(self.url)
        conn.execute("SET default_transaction_read_only = on")
        if conn.execute("SELECT to_regclass('runs') AS t").fetchone()["t"] is None:
            conn.close()
            raise StoreError(f"TOOLPATH_DB={self.db_path!r}: no toolpath store in this database yet (the first run "
                             "or eval creates its tables)")
        return conn

    def _open_writable(self):
        conn = connect(self.url)
        self.home.mkdir(parents=True, exist_ok=True)
        with self._lock, _setup_lock(conn, "creating the store's tables"), conn.transaction():
            conn.execute(_schema())
            for table, column, decl in [*ADDED_COLUMNS, ("runs", "host", "TEXT")]:
                have = conn.execute("SELECT 1 FROM information_schema.columns WHERE table_schema = "
                                    "current_schema() AND table_name = %s AND column_name = %s",
                                    (table, column)).fetchone()
                if not have:  # ALTER TABLE locks the table even when the column is there: only when it is not
                    decl = re.sub(r"\bINTEGER\b", "BIGINT", re.sub(r"\bREAL\b", "DOUBLE PRECISION", decl))
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
            for sql in ADDED_INDEXES:
                conn.execute(sql)
        return conn

    # ---- runs: a run's pid means something only on its own machine -----------------------------------
    def create_run(self, *args, **kwargs) -> str:
        run_id = super().create_run(*args, **kwargs)
        self._exec("UPDATE runs SET host = ? WHERE id = ?", (HOST, run_id))
        return run_id

    def update_run(self, run_id: str, defer: bool = False, **fields) -> None:
        super().update_run(run_id, defer, **fields)
        if "pid" in fields:  # a resume, perhaps on another machine
            self._write(run_id, "UPDATE runs SET host = ? WHERE id = ?", (HOST, run_id), defer)

    @staticmethod
    def _elsewhere(run: dict) -> dict:
        """Store shows a running run whose pid is not alive here as interrupted; on another machine we cannot
        tell, so it stays running (and `toolpath resume` refuses it) rather than risk two machines running it."""
        if run["status"] == "interrupted" and run.get("host") and run["host"] != HOST:
            run["status"] = "running"  # "interrupted" is never stored: Store's _shown made it so
        return run

    def _show(self, row) -> dict:
        return self._elsewhere(super()._show(row))

    def _exec(self, sql, args=()):
        if self.readonly and not sql.lstrip().upper().startswith("SELECT"):
            self._check_writable("write to it")
        with self._lock:
            return self._conn.execute(_pg(sql), tuple(args))

    def read_connection(self):
        raise StoreError("read_connection: a PostgreSQL store is read through its own connection (Store._exec)")

    def _one_transaction(self):
        return self._conn.transaction()

    @staticmethod
    def _dialect(sql: str) -> str:
        return _pg(sql)

    def eval_samples(self, eval_id: str) -> list[dict]:
        rows = super().eval_samples(eval_id)  # ordered by rowid, which only orders: the rows are SQLite's
        for r in rows:
            r.pop("rowid", None)
        return rows

    def _new_saver(self):
        """LangGraph's PostgresSaver on the same database (its own connection), committing step rows with
        each checkpoint."""
        return _postgres_saver(self)

    def prune_checkpoints(self, run_id: str) -> None:
        """Keep only a finished run's last checkpoint (with the blobs it refers to)."""
        saver = self.checkpointer()
        saver.forget(run_id)
        saver.prune([run_id], strategy="keep_latest")


def _postgres_saver(store: PostgresStore):
    """sqlite.StoreSaver's design on LangGraph's PostgresSaver: `put` commits, in one transaction, the run's
    deferred step rows and run update and the checkpoint; ordinary channel writes are not stored, writes of
    LangGraph's own channels (`__…__`: errors, interrupts) are, with the steps deferred so far."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    class PgStoreSaver(DurableCommits, PostgresSaver):
        # -- one transaction per checkpoint -------------------------------------------------------------
        def setup(self) -> None:
            # LangGraph's migrations are not safe to run from two processes at once
            with self.lock, _setup_lock(self.conn, "LangGraph's checkpoint migrations"):
                super().setup()

        @contextmanager
        def _cursor(self, *, pipeline: bool = False):
            with self.lock:
                if self._batch:  # inside _transaction: no pipeline, no inner transaction of its own
                    with self.conn.cursor(binary=True, row_factory=dict_row) as cur:
                        yield cur
                else:
                    with super()._cursor(pipeline=pipeline) as cur:
                        yield cur

        @contextmanager
        def _transaction(self, thread_id: str):
            with self.lock, self.conn.transaction():
                self._batch = True
                try:
                    for sql, args in store.take_deferred(thread_id):
                        self.conn.execute(_pg(sql), args)
                    yield
                finally:
                    self._batch = False

    return PgStoreSaver(connect(store.url))

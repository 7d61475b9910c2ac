"""What the viewer reads from the run store, a page at a time.

The Store's own methods answer "one run" and "one eval"; pages of runs, evals, eval samples and steps are
read here with LIMIT/OFFSET, so a 10,000-step run costs one page to open. The store is opened read-only. On
SQLite the reads go through a separate read-only connection per server thread, so the viewer never waits on
(or takes a write lock from) an eval writing into the same store; on PostgreSQL (TOOLPATH_DB) through the
store's own connection, whose statements it translates. Nothing here writes.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path

from ..runs import Store, open_store
from ..state import StepRecord

SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_LIMIT = 10_000  # one page may hold a whole large run (the benchmark's baseline asks for that)


class Reader:
    """Read side of one store for a threaded server."""

    def __init__(self, home: str | Path | None = None):
        # read-only: the viewer works on a home it cannot write, and never creates one (a missing store reads
        # as empty until a run creates it)
        self.store = open_store(home, readonly=True)
        self._local = threading.local()

    @property
    def home(self) -> Path:
        return self.store.home

    def _db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and _in_memory(conn) and self.store.db_path.is_file():
            conn.close()  # the store did not exist when this thread first read; now it does
            conn = None
        if conn is None:
            conn = self._local.conn = self.store.read_connection()
        return conn

    def _cursor(self, sql: str, args: tuple):
        if type(self.store) is not Store:  # PostgreSQL: the store translates the placeholders
            return self.store._exec(sql, args)
        return self._db().execute(sql, args)

    def _all(self, sql: str, args: tuple = ()) -> list:
        return self._cursor(sql, args).fetchall()

    def _count(self, sql: str, args: tuple = ()) -> int:
        return int(self._cursor(sql.replace("COUNT(*)", "COUNT(*) AS n", 1), args).fetchone()["n"])

    # ---- runs and evals -------------------------------------------------------------------------------
    def run(self, run_id: str) -> dict | None:
        return self.store.get_run(run_id)

    def runs_page(self, offset: int, limit: int) -> tuple[list[dict], int]:
        """Newest first, nested runs only under their parent. Each row through Store.get_run, so a dead
        'running' run shows as interrupted."""
        top = "WHERE parent_id IS NULL" if self.store.has_nesting() else ""
        ids = [r["id"] for r in self._all(f"SELECT id FROM runs {top} ORDER BY created DESC, id DESC LIMIT ? OFFSET ?",
                                           (limit, offset))]
        rows = [r for r in (self.store.get_run(i) for i in ids) if r]
        return rows, self._count(f"SELECT COUNT(*) FROM runs {top}")

    def nested(self, run_id: str) -> list[dict]:
        """The runs nested in `run_id` (capability tools' agents), each with its own under "nested"."""
        return [{**child, "nested": self.nested(child["id"])} for child in self.store.child_runs(run_id)]

    def eval(self, eval_id: str) -> dict | None:
        ev = self.store.get_eval(eval_id)
        if ev is not None:
            ev["score"] = eval_score(ev, self._mean_score(eval_id))
        return ev

    def evals_page(self, offset: int, limit: int) -> tuple[list[dict], int]:
        ids = [r["id"] for r in self._all("SELECT id FROM evals ORDER BY created DESC, id DESC LIMIT ? OFFSET ?",
                                           (limit, offset))]
        rows = [e for e in (self.eval(i) for i in ids) if e]
        return rows, self._count("SELECT COUNT(*) FROM evals")

    def _mean_score(self, eval_id: str) -> float | None:
        row = self._cursor("SELECT AVG(score) AS m FROM eval_samples WHERE eval_id = ?", (eval_id,)).fetchone()
        return None if row["m"] is None else float(row["m"])

    def samples_page(self, eval_id: str, offset: int, limit: int) -> tuple[list[dict], int]:
        rows = self._all("SELECT * FROM eval_samples WHERE eval_id = ? ORDER BY rowid LIMIT ? OFFSET ?",
                         (eval_id, limit, offset))
        out = []
        for r in rows:
            d = dict(r)
            d["detail"] = json_or_text(d.get("detail"))
            out.append(d)
        return out, self._count("SELECT COUNT(*) FROM eval_samples WHERE eval_id = ?", (eval_id,))

    # ---- steps ----------------------------------------------------------------------------------------
    def steps_page(self, run_id: str, offset: int, limit: int) -> tuple[list[dict], int]:
        rows = self._all("SELECT seq, node, started, seconds, tokens_in, tokens_out, payload FROM steps "
                         "WHERE run_id = ? ORDER BY seq LIMIT ? OFFSET ?", (run_id, limit, offset))
        out = [StepRecord.from_row(dict(r)).to_json() for r in rows]
        return out, self._count("SELECT COUNT(*) FROM steps WHERE run_id = ?", (run_id,))

    # ---- artifacts ------------------------------------------------------------------------------------
    def artifact(self, sha256: str) -> tuple[Path, str] | None:
        """(file, mime) of a stored artifact, only for a well-formed digest listed in the artifacts table.

        The file is looked for under this store's artifact folder only: the recorded path when it lies there,
        else the content-addressed place (a store copied to another home keeps its old absolute paths)."""
        if not SHA256.fullmatch(sha256):
            return None
        rows = self._all("SELECT path, mime FROM artifacts WHERE sha256 = ?", (sha256,))
        if not rows:
            return None
        recorded, mime = Path(rows[0]["path"]), rows[0]["mime"]
        root = self.store.artifact_dir.resolve()
        candidates = [recorded, root / sha256[:2] / recorded.name]
        candidates += sorted((root / sha256[:2]).glob(sha256 + "*")) if (root / sha256[:2]).is_dir() else []
        for path in candidates:
            try:
                real = path.resolve()
            except OSError:
                continue
            if real.is_relative_to(root) and real.is_file() and real.name.startswith(sha256):
                return real, mime
        return None

    def close(self) -> None:
        self.store.close()


def _in_memory(conn: sqlite3.Connection) -> bool:
    """Whether `conn` is the empty stand-in for a store that did not exist yet (its main file has no name)."""
    return not conn.execute("PRAGMA database_list").fetchone()[2]


def eval_score(ev: dict, running_mean: float | None) -> float | None:
    """The finished eval's summary score, else the mean over the samples stored so far."""
    summary = ev.get("summary") or {}
    if isinstance(summary.get("score"), (int, float)):
        return float(summary["score"])
    return running_mean


def json_or_text(text):
    """A stored JSON column parsed, or left as text when it is not JSON (or nested too deep to parse)."""
    if text is None or not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text  # shown as it is rather than hidden: a bad row is still evidence

"""The run store: runs, their steps, artifacts, evals and LangGraph checkpoints.

    schema.py    the tables
    clean.py     what every write goes through (strict JSON, valid text, secrets redacted)
    common.py    the home folder, run ids, whether a run's process lives, StoreError
    durable.py   what both checkpointers add to LangGraph's: steps committed with their checkpoint
    sqlite.py    Store: one SQLite file under $TOOLPATH_HOME (the default)
    postgres.py  PostgresStore: the same on a PostgreSQL server several machines share (TOOLPATH_DB)

`open_store()` is how code opens the store: it picks the backend from the environment, so a process and the
workers it starts (which inherit the environment) all use the same one.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..paths import home as default_home  # the store's folder when none is given
from .clean import MAX_DEPTH, clean_data, clean_text, to_json
from .common import StoreError, new_id, pid_alive
from .durable import DurableCommits
from .schema import RUN_FIELDS
from .sqlite import Store

__all__ = ["MAX_DEPTH", "RUN_FIELDS", "DurableCommits", "Store", "StoreError", "clean_data", "clean_text",
           "default_home", "new_id", "open_store", "pid_alive", "to_json"]


def open_store(home: str | Path | None = None, readonly: bool = False) -> Store:
    """The run store of `home` (default $TOOLPATH_HOME): on the PostgreSQL server TOOLPATH_DB names when it is
    set (postgres.PostgresStore, imported only then: psycopg is optional), else the SQLite Store."""
    if os.environ.get("TOOLPATH_DB"):
        from .postgres import PostgresStore

        return PostgresStore(home, readonly=readonly)
    return Store(home, readonly=readonly)

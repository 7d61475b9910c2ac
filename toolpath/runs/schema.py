"""The run store's tables, as SQLite declares them (the PostgreSQL store translates the types)."""

SCHEMA = """
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
ADDED_COLUMNS = [("runs", "pid", "INTEGER"),
                 # A nested run (a capability tool's agent) names the run and the step that called it.
                 ("runs", "parent_id", "TEXT"), ("runs", "parent_seq", "INTEGER")]
# Indexes on added columns, made once the columns exist.
ADDED_INDEXES = ["CREATE INDEX IF NOT EXISTS runs_parent ON runs(parent_id)"]

RUN_FIELDS = ("status", "answer", "error", "score", "steps", "tokens_in", "tokens_out", "seconds", "eval_id", "pid")

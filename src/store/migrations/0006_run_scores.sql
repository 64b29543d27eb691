CREATE TABLE IF NOT EXISTS run_scores (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    kind TEXT NOT NULL,
    criterion TEXT NOT NULL,
    passed INTEGER,
    score REAL NOT NULL,
    explanation TEXT,
    source TEXT,
    cost_usd REAL NOT NULL DEFAULT 0,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS run_scores_run ON run_scores(run_id, id);

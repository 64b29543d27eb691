CREATE TABLE IF NOT EXISTS escalations (
    run_id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    escalated_by TEXT NOT NULL,
    escalated_at TEXT NOT NULL,
    channel TEXT,
    message_ts TEXT,
    resolved_by TEXT,
    resolved_at TEXT
);

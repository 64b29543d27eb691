CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    tool TEXT NOT NULL,
    call_id TEXT NOT NULL,
    requester TEXT,
    approvers TEXT NOT NULL DEFAULT '[]',
    channel TEXT,
    message_ts TEXT,
    checkpoint BLOB NOT NULL,
    created_at TEXT NOT NULL,
    deadline TEXT NOT NULL,
    decision TEXT,
    decided_by TEXT,
    decided_at TEXT
);
CREATE INDEX IF NOT EXISTS approvals_run ON approvals(run_id, created_at);
CREATE INDEX IF NOT EXISTS approvals_open ON approvals(decision, deadline);

CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    dedupe_key TEXT NOT NULL UNIQUE,
    received_at TEXT NOT NULL,
    status TEXT NOT NULL,
    private INTEGER NOT NULL DEFAULT 0,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_status ON events(status, received_at);
ALTER TABLE runs ADD COLUMN event_id TEXT;
ALTER TABLE runs ADD COLUMN lease_until TEXT;
ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
CREATE INDEX IF NOT EXISTS runs_lease ON runs(status, lease_until);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);

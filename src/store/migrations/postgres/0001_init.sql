CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    parent_id TEXT REFERENCES runs(id),
    trigger_summary TEXT NOT NULL,
    status TEXT NOT NULL,
    termination TEXT,
    error TEXT,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cached_input_tokens BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    reasoning_tokens BIGINT NOT NULL DEFAULT 0,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    turns BIGINT NOT NULL DEFAULT 0,
    tool_calls BIGINT NOT NULL DEFAULT 0,
    final_text TEXT,
    skill_loads TEXT NOT NULL DEFAULT '{}',
    event_id TEXT,
    lease_until TEXT,
    attempt BIGINT NOT NULL DEFAULT 1,
    source TEXT NOT NULL DEFAULT '',
    trigger_kind TEXT NOT NULL DEFAULT '',
    actor TEXT,
    private BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status);
CREATE INDEX IF NOT EXISTS runs_parent ON runs(parent_id);
CREATE INDEX IF NOT EXISTS runs_lease ON runs(status, lease_until);
CREATE INDEX IF NOT EXISTS runs_agent ON runs(agent, created_at);

CREATE TABLE IF NOT EXISTS run_events (
    seq BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS run_events_run ON run_events(run_id, seq);

CREATE TABLE IF NOT EXISTS run_files (
    run_id TEXT NOT NULL REFERENCES runs(id),
    file_id TEXT NOT NULL,
    meta TEXT NOT NULL,
    content BYTEA NOT NULL,
    PRIMARY KEY (run_id, file_id)
);

CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    dedupe_key TEXT NOT NULL UNIQUE,
    received_at TEXT NOT NULL,
    status TEXT NOT NULL,
    private BOOLEAN NOT NULL DEFAULT FALSE,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_status ON events(status, received_at);

CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE IF NOT EXISTS run_scores (
    id BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    kind TEXT NOT NULL,
    criterion TEXT NOT NULL,
    passed BOOLEAN,
    score DOUBLE PRECISION NOT NULL,
    explanation TEXT,
    source TEXT,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS run_scores_run ON run_scores(run_id, id);

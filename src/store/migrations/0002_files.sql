CREATE TABLE IF NOT EXISTS run_files (
    run_id TEXT NOT NULL REFERENCES runs(id),
    file_id TEXT NOT NULL,
    meta TEXT NOT NULL,
    content BLOB NOT NULL,
    PRIMARY KEY (run_id, file_id)
);

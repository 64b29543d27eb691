ALTER TABLE runs ADD COLUMN thread_key TEXT;
CREATE INDEX IF NOT EXISTS runs_thread ON runs(thread_key, status);

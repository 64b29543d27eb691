ALTER TABLE events ADD COLUMN claimed_at TEXT;

ALTER TABLE events ADD COLUMN IF NOT EXISTS outcome TEXT;
ALTER TABLE events ADD COLUMN IF NOT EXISTS outcome_detail TEXT;
ALTER TABLE events ADD COLUMN IF NOT EXISTS duplicate_of TEXT;
CREATE INDEX IF NOT EXISTS events_outcome ON events(outcome, id);

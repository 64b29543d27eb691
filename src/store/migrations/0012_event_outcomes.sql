ALTER TABLE events ADD COLUMN outcome TEXT;
ALTER TABLE events ADD COLUMN outcome_detail TEXT;
ALTER TABLE events ADD COLUMN duplicate_of TEXT;
CREATE INDEX IF NOT EXISTS events_outcome ON events(outcome, id);

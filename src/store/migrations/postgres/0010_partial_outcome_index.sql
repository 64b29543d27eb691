-- Deliveries are inserted without an outcome and get one when routed: a partial index
-- keeps the insert on the acknowledgement path from touching it at all.
DROP INDEX IF EXISTS events_outcome;
CREATE INDEX IF NOT EXISTS events_outcome ON events(outcome, id) WHERE outcome IS NOT NULL;

-- The process holding a run's lease: a process that stalled past its lease and
-- resumes cannot renew a lease another replica took.
ALTER TABLE runs ADD COLUMN lease_owner TEXT;

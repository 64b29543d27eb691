-- One human score per person, run and criterion: two clicks of the same feedback
-- button that arrive together (a double-click, a replayed request) count once, and a
-- person's reactions count once. Earlier duplicates go first; the first one stays.
DELETE FROM run_scores
WHERE kind = 'human'
  AND source IS NOT NULL
  AND id NOT IN (
    SELECT MIN(id) FROM run_scores
    WHERE kind = 'human' AND source IS NOT NULL
    GROUP BY run_id, criterion, source
  );
CREATE UNIQUE INDEX IF NOT EXISTS run_scores_one_human_per_person
    ON run_scores(run_id, criterion, source) WHERE kind = 'human';

-- Events routed before outcomes were recorded take the outcome their queue state
-- meant, so listing by outcome is one index range, not an OR over two.
UPDATE events SET outcome = 'started' WHERE outcome IS NULL AND status = 'routed';
UPDATE events SET outcome = 'no_agent' WHERE outcome IS NULL AND status = 'unmatched';

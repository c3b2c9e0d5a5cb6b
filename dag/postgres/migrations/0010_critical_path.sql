-- Schema version 10: one order of ready tasks (DESIGN §17), as the SQLite
-- store's version 10 (see dag/migrations/0010_critical_path.sql): raced,
-- then chain, the longest chain of work waiting on a task.
ALTER TABLE tasks ADD COLUMN chain integer NOT NULL DEFAULT 1 CHECK (chain >= 1);
ALTER TABLE tasks ADD COLUMN raced integer NOT NULL DEFAULT 0 CHECK (raced IN (0, 1));

-- PostgreSQL allows one recursive reference: both kinds of edge come from
-- a LATERAL subquery (as dag's reachesQueryServer).
WITH RECURSIVE up(id, len) AS (
	SELECT id, 1 FROM tasks WHERE blocker_count > 0 OR child_count > 0
	UNION
	SELECT e.id, up.len + 1 FROM up, LATERAL (
		SELECT d.blocker_id AS id FROM deps d WHERE d.blocked_id = up.id
		UNION ALL
		SELECT c.id FROM tasks c WHERE c.parent_id = up.id) AS e
)
UPDATE tasks SET chain = m.len
	FROM (SELECT id, max(len) AS len FROM up GROUP BY id) AS m
	WHERE m.id = tasks.id AND m.len > 1;

DROP INDEX tasks_ready;
DROP INDEX tasks_ready_feature;
CREATE INDEX tasks_ready ON tasks (priority, raced DESC, chain DESC, seq)
	WHERE status = 'pending' AND child_count = 0 AND unmet_blockers = 0 AND parent_failed = 0;
CREATE INDEX tasks_ready_feature ON tasks (feature, priority, raced DESC, chain DESC, seq)
	WHERE status = 'pending' AND child_count = 0 AND unmet_blockers = 0 AND parent_failed = 0
	AND feature IS NOT NULL;

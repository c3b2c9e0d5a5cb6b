-- ralph task graph, schema version 10: one order of ready tasks (DESIGN
-- §17): priority, then a task that lost a race to land (raced, set by a
-- release after an integration conflict, cleared by its next claim), then
-- the longest chain of work waiting on it (chain), then age (seq).
--
-- chain counts the tasks on the longest path that starts at the task and
-- follows what waits for it: its dependents (deps) and its parent (a
-- parent waits for its children); 1 for a task nothing waits for. It is a
-- property of the graph, not of statuses: for a ready task everything
-- waiting on it is still to do. Kept by every write that changes the
-- graph (dag/chain.go); computed here once for the plans of before.
ALTER TABLE tasks ADD COLUMN chain INTEGER NOT NULL DEFAULT 1 CHECK (chain >= 1);
ALTER TABLE tasks ADD COLUMN raced INTEGER NOT NULL DEFAULT 0 CHECK (raced IN (0, 1));

-- From every task something waits on (its end, length 1), back along what
-- it waits for: every (task, length of a path from it) once (UNION), at
-- most the tasks times the graph's depth rows.
WITH RECURSIVE up(id, len) AS (
	SELECT id, 1 FROM tasks WHERE blocker_count > 0 OR child_count > 0
	UNION
	SELECT d.blocker_id, up.len + 1 FROM up JOIN deps d ON d.blocked_id = up.id
	UNION
	SELECT c.id, up.len + 1 FROM up JOIN tasks c ON c.parent_id = up.id
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

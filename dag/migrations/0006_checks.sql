-- ralph task graph, schema version 6: per-task checks (DESIGN §14).
-- check_cmd is the task's check, a shell command the build loop runs in
-- the task's tree after the agent reports it done, before the verifier
-- ('' for none: loop.Task.Check); check_by is the agent that wrote it,
-- '' when a person did (loop.Task.CheckBy). Existing tasks have none.
ALTER TABLE tasks ADD COLUMN check_cmd TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN check_by TEXT NOT NULL DEFAULT '';

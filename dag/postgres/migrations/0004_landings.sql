-- Schema version 4: landings (DESIGN §13), as the SQLite store's version
-- 5. Each commit ralph puts on the plan's integration branch, recorded
-- before the branch moves and confirmed after, and where ralph last put
-- each integration branch (see dag/migrations/0005_landings.sql).
CREATE TABLE landings (
	seq           bigint PRIMARY KEY,
	branch        text NOT NULL CHECK (branch <> ''),
	commit_id     text NOT NULL CHECK (commit_id <> ''),
	parent_commit text NOT NULL,
	task_id       text NOT NULL,
	generation    bigint NOT NULL,
	completions   integer NOT NULL DEFAULT 0,
	state         text NOT NULL CHECK (state IN ('recorded', 'landed', 'void', 'dropped')),
	recorded_at   bigint NOT NULL,
	updated_at    bigint NOT NULL,
	UNIQUE (branch, commit_id)
);
CREATE TRIGGER landings_seq BEFORE INSERT ON landings FOR EACH ROW EXECUTE FUNCTION next_seq();
CREATE INDEX landings_task ON landings (branch, task_id);

CREATE TABLE branch_tips (
	branch     text PRIMARY KEY,
	commit_id  text NOT NULL CHECK (commit_id <> ''),
	updated_at bigint NOT NULL
);

-- ralph task graph, schema version 5: landings (DESIGN §13, "Only ralph
-- moves the plan and the integration branch").

-- Each commit ralph puts on a plan's integration branch, recorded before
-- the branch moves and confirmed after: "done means merged" counts only
-- these. parent_commit is the tip the commit was made on; completions is
-- how often the task had been recorded done when the landing was
-- recorded (loop.Landing). state: 'recorded' (before the move), 'landed'
-- (confirmed), 'void' (the branch moved on without it), 'dropped' (the
-- branch lost it and a person accepted that: ralph build --accept-tip).
-- task_id may be '' for a commit ralph lands that is no task's (room for
-- DESIGN §14's merges of the base; this version records none).
CREATE TABLE landings (
	seq           INTEGER PRIMARY KEY,
	branch        TEXT NOT NULL CHECK (branch <> ''),
	commit_id     TEXT NOT NULL CHECK (commit_id <> ''),
	parent_commit TEXT NOT NULL,
	task_id       TEXT NOT NULL,
	generation    INTEGER NOT NULL,
	completions   INTEGER NOT NULL DEFAULT 0,
	state         TEXT NOT NULL CHECK (state IN ('recorded', 'landed', 'void', 'dropped')),
	recorded_at   INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	UNIQUE (branch, commit_id)
);
CREATE INDEX landings_task ON landings (branch, task_id);

-- Where ralph last put each integration branch: a tip that is not this
-- one, and not explained by the landings recorded since, was moved by
-- someone else.
CREATE TABLE branch_tips (
	branch     TEXT PRIMARY KEY,
	commit_id  TEXT NOT NULL CHECK (commit_id <> ''),
	updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- ralph task graph, schema version 1.
-- Times are Unix nanoseconds (UTC); 0 means unset.

CREATE TABLE features (
	seq        INTEGER PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE CHECK (name <> ''),
	spec_path  TEXT NOT NULL DEFAULT '',
	plan_path  TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);

CREATE TABLE tasks (
	-- seq is the insertion order: ready tasks tie-break on it.
	seq                 INTEGER PRIMARY KEY,
	id                  TEXT NOT NULL UNIQUE CHECK (id <> ''),
	title               TEXT NOT NULL CHECK (trim(title) <> ''),
	description         TEXT NOT NULL DEFAULT '',
	status              TEXT NOT NULL DEFAULT 'pending'
		CHECK (status IN ('pending', 'in_progress', 'done', 'failed', 'blocked')),
	priority            INTEGER NOT NULL,
	-- Deferred: an import may name a parent that comes later in the batch.
	parent_id           TEXT REFERENCES tasks (id) DEFERRABLE INITIALLY DEFERRED,
	feature             TEXT REFERENCES features (name),
	claimed_by          TEXT NOT NULL DEFAULT '',
	claimed_at          INTEGER NOT NULL DEFAULT 0,
	lease_expires_at    INTEGER NOT NULL DEFAULT 0,
	retry_count         INTEGER NOT NULL DEFAULT 0,
	verification_status TEXT NOT NULL DEFAULT '',
	created_at          INTEGER NOT NULL,
	updated_at          INTEGER NOT NULL,
	-- Readiness, kept up to date by every write (never recomputed on read):
	-- blockers not yet done, number of children, whether the parent failed.
	unmet_blockers      INTEGER NOT NULL DEFAULT 0 CHECK (unmet_blockers >= 0),
	child_count         INTEGER NOT NULL DEFAULT 0 CHECK (child_count >= 0),
	parent_failed       INTEGER NOT NULL DEFAULT 0 CHECK (parent_failed IN (0, 1)),
	-- Rows of deps naming the task as blocked and as blocker: most tasks
	-- have none, and these spare them a look-up in deps.
	blocker_count       INTEGER NOT NULL DEFAULT 0 CHECK (blocker_count >= 0),
	dependent_count     INTEGER NOT NULL DEFAULT 0 CHECK (dependent_count >= 0)
);

-- The ready queue: the first ready task is the first entry of this index.
CREATE INDEX tasks_ready ON tasks (priority, seq)
	WHERE status = 'pending' AND child_count = 0 AND unmet_blockers = 0 AND parent_failed = 0;
CREATE INDEX tasks_ready_feature ON tasks (feature, priority, seq)
	WHERE status = 'pending' AND child_count = 0 AND unmet_blockers = 0 AND parent_failed = 0
	AND feature IS NOT NULL;
CREATE INDEX tasks_parent ON tasks (parent_id) WHERE parent_id IS NOT NULL;
-- The few in_progress tasks (leases, active claims, agents), by lease
-- expiry: the check every write makes for expired leases reads one index
-- entry and no task row. An index over every status would cost each claim
-- and completion more page writes; counts come from status_counts instead.
CREATE INDEX tasks_active ON tasks (lease_expires_at) WHERE status = 'in_progress';

-- Number of tasks by feature ('' for none) and status, kept by triggers so
-- that Counts reads a handful of rows whatever the plan's size. 'pending'
-- counts the in_progress tasks too (Counts subtracts those, the few entries
-- of tasks_active), so that a claim, or a lease returned, leaves this table
-- alone: one page less to write.
CREATE TABLE status_counts (
	feature TEXT NOT NULL,
	status  TEXT NOT NULL,
	n       INTEGER NOT NULL CHECK (n >= 0),
	PRIMARY KEY (feature, status)
) WITHOUT ROWID;

CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks BEGIN
	INSERT INTO status_counts (feature, status, n)
		VALUES (coalesce(NEW.feature, ''), iif(NEW.status = 'in_progress', 'pending', NEW.status), 1)
		ON CONFLICT (feature, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER tasks_count_update AFTER UPDATE OF status, feature ON tasks
WHEN iif(OLD.status = 'in_progress', 'pending', OLD.status) IS NOT iif(NEW.status = 'in_progress', 'pending', NEW.status)
	OR OLD.feature IS NOT NEW.feature BEGIN
	UPDATE status_counts SET n = n - 1
		WHERE feature = coalesce(OLD.feature, '') AND status = iif(OLD.status = 'in_progress', 'pending', OLD.status);
	INSERT INTO status_counts (feature, status, n)
		VALUES (coalesce(NEW.feature, ''), iif(NEW.status = 'in_progress', 'pending', NEW.status), 1)
		ON CONFLICT (feature, status) DO UPDATE SET n = n + 1;
END;

-- blocked waits for blocker; seq keeps the order the dependencies were added.
CREATE TABLE deps (
	seq        INTEGER PRIMARY KEY,
	blocked_id TEXT NOT NULL REFERENCES tasks (id),
	blocker_id TEXT NOT NULL REFERENCES tasks (id),
	UNIQUE (blocked_id, blocker_id),
	CHECK (blocked_id <> blocker_id)
);
CREATE INDEX deps_blocker ON deps (blocker_id);

-- Clustered by task: appending an entry writes one b-tree page, not a
-- table page and an index page. seq numbers a task's entries from 1.
CREATE TABLE task_logs (
	task_id TEXT NOT NULL REFERENCES tasks (id),
	seq     INTEGER NOT NULL,
	at      INTEGER NOT NULL,
	kind    TEXT NOT NULL,
	message TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;

CREATE TABLE receipts (
	seq                INTEGER PRIMARY KEY,
	session            TEXT NOT NULL DEFAULT '',
	iteration          INTEGER NOT NULL DEFAULT 0,
	mode               TEXT NOT NULL DEFAULT '',
	task_id            TEXT NOT NULL DEFAULT '',
	model              TEXT NOT NULL DEFAULT '',
	input_tokens       INTEGER NOT NULL DEFAULT 0,
	output_tokens      INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens INTEGER NOT NULL DEFAULT 0,
	cost_usd           REAL NOT NULL DEFAULT 0,
	started_at         INTEGER NOT NULL DEFAULT 0,
	duration_ns        INTEGER NOT NULL DEFAULT 0,
	turns              INTEGER NOT NULL DEFAULT 0,
	exit_reason        TEXT NOT NULL DEFAULT '',
	verdict            TEXT NOT NULL DEFAULT ''
);

-- ralph task graph on PostgreSQL, schema version 1: the SQLite schema's
-- versions 1–3 (dag/migrations) in one, in the plan's own schema, which
-- every connection of the plan has as its search_path. Times are Unix
-- nanoseconds (UTC); 0 means unset. Integer flags and counters are
-- integers, as on SQLite, so that the graph rules' queries read the same.

-- seq numbers a table's rows in insertion order, as SQLite's INTEGER
-- PRIMARY KEY does: a row inserted without one gets the largest plus one.
-- Every insert runs under the plan's write lock, so no two see the same
-- largest.
CREATE FUNCTION next_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.seq IS NULL THEN
		EXECUTE format('SELECT coalesce(max(seq), 0) + 1 FROM %I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME) INTO NEW.seq;
	END IF;
	RETURN NEW;
END
$$;

CREATE TABLE features (
	seq        bigint PRIMARY KEY,
	name       text NOT NULL UNIQUE CHECK (name <> ''),
	spec_path  text NOT NULL DEFAULT '',
	plan_path  text NOT NULL DEFAULT '',
	created_at bigint NOT NULL
);
CREATE TRIGGER features_seq BEFORE INSERT ON features FOR EACH ROW EXECUTE FUNCTION next_seq();

CREATE TABLE tasks (
	seq                 bigint PRIMARY KEY,
	id                  text NOT NULL UNIQUE CHECK (id <> ''),
	title               text NOT NULL CHECK (trim(title) <> ''),
	description         text NOT NULL DEFAULT '',
	status              text NOT NULL DEFAULT 'pending'
		CHECK (status IN ('pending', 'in_progress', 'done', 'failed', 'blocked')),
	priority            integer NOT NULL,
	parent_id           text REFERENCES tasks (id) DEFERRABLE INITIALLY DEFERRED,
	feature             text REFERENCES features (name),
	claimed_by          text NOT NULL DEFAULT '',
	claimed_at          bigint NOT NULL DEFAULT 0,
	lease_expires_at    bigint NOT NULL DEFAULT 0,
	retry_count         integer NOT NULL DEFAULT 0,
	verification_status text NOT NULL DEFAULT '',
	created_at          bigint NOT NULL,
	updated_at          bigint NOT NULL,
	unmet_blockers      integer NOT NULL DEFAULT 0 CHECK (unmet_blockers >= 0),
	child_count         integer NOT NULL DEFAULT 0 CHECK (child_count >= 0),
	parent_failed       integer NOT NULL DEFAULT 0 CHECK (parent_failed IN (0, 1)),
	blocker_count       integer NOT NULL DEFAULT 0 CHECK (blocker_count >= 0),
	dependent_count     integer NOT NULL DEFAULT 0 CHECK (dependent_count >= 0),
	claim_mode          text NOT NULL DEFAULT '' CHECK (claim_mode IN ('', 'loop', 'agent')),
	holder_host         text NOT NULL DEFAULT '',
	holder_pid          bigint NOT NULL DEFAULT 0,
	holder_start        bigint NOT NULL DEFAULT 0,
	generation          bigint NOT NULL DEFAULT 0
);
CREATE TRIGGER tasks_seq BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION next_seq();

-- The ready queue, the in_progress tasks by lease: as on SQLite.
CREATE INDEX tasks_ready ON tasks (priority, seq)
	WHERE status = 'pending' AND child_count = 0 AND unmet_blockers = 0 AND parent_failed = 0;
CREATE INDEX tasks_ready_feature ON tasks (feature, priority, seq)
	WHERE status = 'pending' AND child_count = 0 AND unmet_blockers = 0 AND parent_failed = 0
	AND feature IS NOT NULL;
CREATE INDEX tasks_parent ON tasks (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX tasks_active ON tasks (lease_expires_at) WHERE status = 'in_progress';

-- Tasks by feature ('' for none) and status, 'pending' counting the
-- in_progress ones too (a claim moves no count), kept by triggers.
CREATE TABLE status_counts (
	feature text NOT NULL,
	status  text NOT NULL,
	n       integer NOT NULL CHECK (n >= 0),
	PRIMARY KEY (feature, status)
);

CREATE FUNCTION count_status() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	IF TG_OP = 'UPDATE' THEN
		UPDATE status_counts SET n = n - 1
			WHERE feature = coalesce(OLD.feature, '')
			AND status = CASE OLD.status WHEN 'in_progress' THEN 'pending' ELSE OLD.status END;
	END IF;
	INSERT INTO status_counts (feature, status, n)
		VALUES (coalesce(NEW.feature, ''), CASE NEW.status WHEN 'in_progress' THEN 'pending' ELSE NEW.status END, 1)
		ON CONFLICT (feature, status) DO UPDATE SET n = status_counts.n + 1;
	RETURN NULL;
END
$$;
CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION count_status();
CREATE TRIGGER tasks_count_update AFTER UPDATE OF status, feature ON tasks FOR EACH ROW
	WHEN ((CASE OLD.status WHEN 'in_progress' THEN 'pending' ELSE OLD.status END)
		IS DISTINCT FROM (CASE NEW.status WHEN 'in_progress' THEN 'pending' ELSE NEW.status END)
		OR OLD.feature IS DISTINCT FROM NEW.feature)
	EXECUTE FUNCTION count_status();

-- Loops waiting for work (DESIGN §8) LISTEN on the plan's schema name:
-- every change that can make a task ready, or end a claim, notifies it at
-- commit. A claim does neither, and notifies nobody.
CREATE FUNCTION notify_plan() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(TG_TABLE_SCHEMA, '');
	RETURN NULL;
END
$$;
CREATE TRIGGER tasks_notify_insert AFTER INSERT ON tasks FOR EACH STATEMENT EXECUTE FUNCTION notify_plan();
CREATE TRIGGER tasks_notify_update AFTER UPDATE ON tasks FOR EACH ROW
	WHEN (NEW.status <> 'in_progress' AND
		(OLD.status, OLD.unmet_blockers, OLD.child_count, OLD.parent_failed)
		IS DISTINCT FROM (NEW.status, NEW.unmet_blockers, NEW.child_count, NEW.parent_failed))
	EXECUTE FUNCTION notify_plan();

CREATE TABLE deps (
	seq        bigint PRIMARY KEY,
	blocked_id text NOT NULL REFERENCES tasks (id),
	blocker_id text NOT NULL REFERENCES tasks (id),
	UNIQUE (blocked_id, blocker_id),
	CHECK (blocked_id <> blocker_id)
);
CREATE TRIGGER deps_seq BEFORE INSERT ON deps FOR EACH ROW EXECUTE FUNCTION next_seq();
CREATE INDEX deps_blocker ON deps (blocker_id);

CREATE TABLE task_logs (
	task_id text NOT NULL REFERENCES tasks (id),
	seq     integer NOT NULL,
	at      bigint NOT NULL,
	kind    text NOT NULL,
	message text NOT NULL DEFAULT '',
	actor   text NOT NULL DEFAULT '',
	PRIMARY KEY (task_id, seq)
);

CREATE TABLE receipts (
	seq                bigint PRIMARY KEY,
	session            text NOT NULL DEFAULT '',
	iteration          integer NOT NULL DEFAULT 0,
	mode               text NOT NULL DEFAULT '',
	task_id            text NOT NULL DEFAULT '',
	model              text NOT NULL DEFAULT '',
	input_tokens       bigint NOT NULL DEFAULT 0,
	output_tokens      bigint NOT NULL DEFAULT 0,
	cache_read_tokens  bigint NOT NULL DEFAULT 0,
	cache_write_tokens bigint NOT NULL DEFAULT 0,
	cost_usd           double precision NOT NULL DEFAULT 0,
	started_at         bigint NOT NULL DEFAULT 0,
	duration_ns        bigint NOT NULL DEFAULT 0,
	turns              integer NOT NULL DEFAULT 0,
	exit_reason        text NOT NULL DEFAULT '',
	verdict            text NOT NULL DEFAULT '',
	worker             text NOT NULL DEFAULT ''
);
CREATE TRIGGER receipts_seq BEFORE INSERT ON receipts FOR EACH ROW EXECUTE FUNCTION next_seq();

CREATE TABLE plan_settings (
	key   text PRIMARY KEY,
	value text NOT NULL
);

-- Feature specs and plans, stored with the plan so that every machine
-- reads the same (DESIGN §10): path (as features.spec_path / plan_path
-- name it) and content.
CREATE TABLE feature_files (
	path    text PRIMARY KEY,
	content text NOT NULL,
	updated_at bigint NOT NULL
);

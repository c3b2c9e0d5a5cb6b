-- Schema version 7: run records (DESIGN §15), as the SQLite store's
-- version 7: one row per `ralph build`, `ralph plan` or `ralph prompt`
-- run, written when it begins and again when it ends (see
-- dag/migrations/0007_runs.sql).
CREATE TABLE runs (
	seq             bigint PRIMARY KEY,
	kind            text NOT NULL CHECK (kind IN ('build', 'plan', 'prompt')),
	holder_host     text NOT NULL,
	holder_pid      bigint NOT NULL,
	holder_start    bigint NOT NULL,
	started_at      bigint NOT NULL,
	ended_at        bigint NOT NULL DEFAULT 0,
	outcome         text NOT NULL CHECK (outcome <> ''),
	exit_code       integer,
	done            integer NOT NULL DEFAULT 0,
	failed          integer NOT NULL DEFAULT 0,
	remaining       integer NOT NULL DEFAULT 0,
	cost_usd        double precision NOT NULL DEFAULT 0,
	agents          integer NOT NULL DEFAULT 0,
	integration_tip text NOT NULL DEFAULT ''
);
CREATE TRIGGER runs_seq BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION next_seq();

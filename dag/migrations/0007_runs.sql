-- ralph task graph, schema version 7: run records (DESIGN §15, "Runs are
-- records"; loop.RunRecorder). One row per `ralph build`, `ralph plan` or
-- `ralph prompt` run, written when it begins and again when it ends.
-- holder_host, holder_pid and holder_start name the process that ran it
-- (loop.Holder: a row still 'running' whose holder is gone from this host
-- is a run that died, killed with kill -9). outcome is 'running' until
-- the run ends, then a loop.Outcome word; exit_code is NULL until then
-- (and stays NULL for a run that died); ended_at 0 until then.
CREATE TABLE runs (
	seq             INTEGER PRIMARY KEY,
	kind            TEXT NOT NULL CHECK (kind IN ('build', 'plan', 'prompt')),
	holder_host     TEXT NOT NULL,
	holder_pid      INTEGER NOT NULL,
	holder_start    INTEGER NOT NULL,
	started_at      INTEGER NOT NULL,
	ended_at        INTEGER NOT NULL DEFAULT 0,
	outcome         TEXT NOT NULL CHECK (outcome <> ''),
	exit_code       INTEGER,
	done            INTEGER NOT NULL DEFAULT 0,
	failed          INTEGER NOT NULL DEFAULT 0,
	remaining       INTEGER NOT NULL DEFAULT 0,
	cost_usd        REAL NOT NULL DEFAULT 0,
	agents          INTEGER NOT NULL DEFAULT 0,
	integration_tip TEXT NOT NULL DEFAULT ''
);

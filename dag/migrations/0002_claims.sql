-- ralph task graph, schema version 2: who holds a claim, which claim it is,
-- and who did what (DESIGN §8, "Holders", "Claim generations", "Task
-- history").

-- Who made the current claim: 'loop' (the loop claimed for the agent it
-- runs: only the loop may complete or fail it), 'agent' (the agent claimed
-- itself), '' (by hand, or unclaimed).
ALTER TABLE tasks ADD COLUMN claim_mode TEXT NOT NULL DEFAULT ''
	CHECK (claim_mode IN ('', 'loop', 'agent'));
-- The process that keeps the current claim alive (loop.Holder): host
-- identity, pid, start time; '' / 0 for a claim with a lease only.
ALTER TABLE tasks ADD COLUMN holder_host TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN holder_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN holder_start INTEGER NOT NULL DEFAULT 0;
-- The number of the current (or last) claim: a fencing token for its
-- outcomes.
ALTER TABLE tasks ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;

-- Who made each history entry: an agent id, a person, or 'ralph'.
ALTER TABLE task_logs ADD COLUMN actor TEXT NOT NULL DEFAULT '';

-- Schema version 13: a change that can make a task ready notifies the
-- plan's channel only while a loop or a viewer waits. A NOTIFY takes a
-- lock of the whole cluster from its commit's start to its end, WAL flush
-- included, so that every transaction that notifies commits after the one
-- before it, alone: with nobody listening, that was most of what capped
-- the plan's completions per second (scripts/bench-postgres-bounds.sh).
--
-- A process that waits holds the shared form of 32 advisory locks, the
-- plan's "waiting" shards (first key 0x52414c57, "RALW", plus the shard;
-- second key the plan's id), on its listening connection, taken
-- after its LISTEN and before it reads the plan (listen.go). A change asks
-- for the exclusive form of its shard (its server process modulo 32), or
-- failing that of the next one, without waiting: it gets one only while
-- no process waits (or wants to), keeps it until its commit and notifies
-- nobody; else it notifies. A wait that starts while such a change is
-- under way waits for the change's commit before it reads the plan, and
-- sees it. Two changes whose server processes share a shard notify when
-- they meet, with nobody waiting: that costs time, not correctness.
CREATE OR REPLACE FUNCTION notify_plan() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	plan integer := CAST(substr(TG_TABLE_SCHEMA, 12) AS integer);
	shard integer := pg_backend_pid() % 32;
BEGIN
	IF NOT (pg_try_advisory_xact_lock(1380011095 + shard, plan)
		OR pg_try_advisory_xact_lock(1380011095 + (shard + 1) % 32, plan)) THEN
		PERFORM pg_notify(TG_TABLE_SCHEMA, '');
	END IF;
	RETURN NULL;
END
$$;

-- Schema version 5: a claim wakes the plan's viewers, and only them.
-- Claims notify no waiting loop (a NOTIFY queues the commits of the
-- transactions that make it behind each other, DESIGN §10), so `ralph
-- serve` once looked at the claims every second, and on a virtual machine
-- each wake-up of an idle viewer cost milliseconds of CPU. Now a viewer
-- listens on the channel <schema>_claims as well, and one connection of
-- each viewer waits for, or holds, the advisory lock (0x52414c56, the
-- plan's id) for as long as it watches. A claim, or a task claimed again,
-- asks for that lock's shared form without waiting: it cannot have it
-- while a viewer waits or holds, and then notifies that channel; with no
-- viewer it takes it (until its commit, conflicting with nothing but a
-- viewer) and notifies nobody. The ask costs a claim a few microseconds.
-- The plan's id is read from its schema's name, ralph_plan_<id>.
CREATE FUNCTION notify_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NOT pg_try_advisory_xact_lock_shared(1380011094, CAST(substr(TG_TABLE_SCHEMA, 12) AS integer)) THEN
		PERFORM pg_notify(TG_TABLE_SCHEMA || '_claims', '');
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER tasks_notify_claim AFTER UPDATE ON tasks FOR EACH ROW
	WHEN (NEW.status = 'in_progress' AND
		(OLD.status <> 'in_progress' OR OLD.generation <> NEW.generation))
	EXECUTE FUNCTION notify_claim();

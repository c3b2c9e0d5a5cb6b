-- Schema version 12: the counts of tasks by status (status_counts) are
-- kept in shards, one per server process (backend) modulo 32, so that
-- moves on many connections at once no longer queue behind each other:
-- the rows of the plan's pending and done tasks were every completion's
-- to update, and a row updated by one transaction stays locked to every
-- other until its commit, WAL flush included. A shard's count may fall
-- below zero (a task counted in one shard, moved by a process of
-- another); the sum over the shards is the count. The SQLite store has
-- one writer at a time and keeps one row per status.
ALTER TABLE status_counts DROP CONSTRAINT status_counts_n_check;
ALTER TABLE status_counts ADD COLUMN shard integer NOT NULL DEFAULT 0;
ALTER TABLE status_counts DROP CONSTRAINT status_counts_pkey;
ALTER TABLE status_counts ADD PRIMARY KEY (feature, status, shard);

CREATE OR REPLACE FUNCTION count_status() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	IF TG_OP = 'UPDATE' THEN
		INSERT INTO status_counts (feature, status, shard, n)
			VALUES (coalesce(OLD.feature, ''), CASE OLD.status WHEN 'in_progress' THEN 'pending' ELSE OLD.status END,
				pg_backend_pid() % 32, -1)
			ON CONFLICT (feature, status, shard) DO UPDATE SET n = status_counts.n - 1;
	END IF;
	INSERT INTO status_counts (feature, status, shard, n)
		VALUES (coalesce(NEW.feature, ''), CASE NEW.status WHEN 'in_progress' THEN 'pending' ELSE NEW.status END,
			pg_backend_pid() % 32, 1)
		ON CONFLICT (feature, status, shard) DO UPDATE SET n = status_counts.n + 1;
	RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION count_inserted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO status_counts (feature, status, shard, n)
		SELECT coalesce(feature, ''), CASE status WHEN 'in_progress' THEN 'pending' ELSE status END,
			pg_backend_pid() % 32, count(*)
		FROM inserted GROUP BY 1, 2
		ON CONFLICT (feature, status, shard) DO UPDATE SET n = status_counts.n + excluded.n;
	RETURN NULL;
END
$$;

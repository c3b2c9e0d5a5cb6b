-- Schema version 2: the counts of tasks by status (status_counts) grow
-- once per INSERT statement, from the statement's new rows, instead of
-- once per row. Each row's update of the same status_counts row left,
-- within the one transaction of an import, a version of it that every
-- later update stepped over again: importing 20,000 tasks took 120 s,
-- 100,000 more than a quarter of an hour. Updates of tasks are still
-- counted row by row (tasks_count_update): they come a few at a time.
CREATE FUNCTION count_inserted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO status_counts (feature, status, n)
		SELECT coalesce(feature, ''), CASE status WHEN 'in_progress' THEN 'pending' ELSE status END, count(*)
		FROM inserted GROUP BY 1, 2
		ON CONFLICT (feature, status) DO UPDATE SET n = status_counts.n + excluded.n;
	RETURN NULL;
END
$$;
DROP TRIGGER tasks_count_insert ON tasks;
CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks REFERENCING NEW TABLE AS inserted
	FOR EACH STATEMENT EXECUTE FUNCTION count_inserted();

-- ralph task graph, schema version 9: the ralph that ran a run
-- (loop.RunRecord.Version): its version, commit and Go release, as `ralph
-- version` gives them. '' for runs recorded before version 9.
ALTER TABLE runs ADD COLUMN version TEXT NOT NULL DEFAULT '';

-- Schema version 9: the ralph that ran a run (loop.RunRecord.Version), as
-- the SQLite store's version 9 (see dag/migrations/0009_run_version.sql).
ALTER TABLE runs ADD COLUMN version text NOT NULL DEFAULT '';

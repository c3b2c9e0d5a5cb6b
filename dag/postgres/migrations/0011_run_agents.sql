-- Schema version 11: the agent CLIs a run's sessions ran on
-- (loop.RunRecord.AgentNames), as the SQLite store's version 11 (see
-- dag/migrations/0011_run_agents.sql).
ALTER TABLE runs ADD COLUMN agent_names text NOT NULL DEFAULT '';

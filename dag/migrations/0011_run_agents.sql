-- ralph task graph, schema version 11: the agent CLIs a run's sessions ran
-- on (loop.RunRecord.AgentNames), comma-separated in the order they first
-- ran ("claude,codex" for a pool that moved on). '' for runs recorded
-- before version 11, and for runs with no session.
ALTER TABLE runs ADD COLUMN agent_names TEXT NOT NULL DEFAULT '';

-- ralph task graph, schema version 3: parallel builds (DESIGN §9).

-- The worker ("w1", "w2", …) whose agent a receipt is of; '' for a build
-- without workers.
ALTER TABLE receipts ADD COLUMN worker TEXT NOT NULL DEFAULT '';

-- What a plan records about itself once, such as the integration branch
-- of its parallel builds ("integration_branch").
CREATE TABLE plan_settings (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;

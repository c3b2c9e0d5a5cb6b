-- ralph task graph, schema version 4: other agents (DESIGN §11).

-- The agent CLI that ran the session ("claude", "codex", "gemini",
-- "opencode"); '' for receipts written before it was recorded, and for
-- runners that do not say.
ALTER TABLE receipts ADD COLUMN agent TEXT NOT NULL DEFAULT '';

-- Where cost_usd comes from: 'reported' by the agent, 'estimated' from
-- its tokens with a price table, or 'unknown' (the agent reported none
-- and no price was known; cost_usd is 0). '' means reported.
ALTER TABLE receipts ADD COLUMN cost_source TEXT NOT NULL DEFAULT '';

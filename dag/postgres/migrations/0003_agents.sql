-- Schema version 3: other agents (DESIGN §11), as the SQLite store's
-- version 4. The agent CLI that ran a session, and where its cost comes
-- from ('reported', 'estimated', 'unknown'; '' means reported).
ALTER TABLE receipts ADD COLUMN agent TEXT NOT NULL DEFAULT '';
ALTER TABLE receipts ADD COLUMN cost_source TEXT NOT NULL DEFAULT '';

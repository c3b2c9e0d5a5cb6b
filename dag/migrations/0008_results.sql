-- ralph task graph, schema version 8: how the iteration of a receipt
-- ended (loop.Receipt.Result, loop.ResultStore): a session that succeeded
-- may belong to an iteration that failed its test gate, its check or
-- verification, which `ralph status` must not show as a success. '' while
-- the iteration is under way, for a verifier's receipt, and for receipts
-- written before version 8. The index serves RecordResult's update.
ALTER TABLE receipts ADD COLUMN result TEXT NOT NULL DEFAULT '';
CREATE INDEX receipts_iteration ON receipts (session, worker, iteration);

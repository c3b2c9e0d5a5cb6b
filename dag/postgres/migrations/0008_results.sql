-- Schema version 8: how the iteration of a receipt ended
-- (loop.Receipt.Result), as the SQLite store's version 8 (see
-- dag/migrations/0008_results.sql).
ALTER TABLE receipts ADD COLUMN result text NOT NULL DEFAULT '';
CREATE INDEX receipts_iteration ON receipts (session, worker, iteration);

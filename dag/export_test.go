package dag

import (
	"context"
	"testing"
)

// What the external tests (package dag_test), which run against a SQLite
// file and a plan on PostgreSQL alike, need of the package's own test
// helpers. Each reads the store through its own pool, with queries both
// databases accept.
var (
	// Dump returns every row of the plan's tables, in a stable order.
	Dump = dump
	// CheckCounts checks the counters the writes keep against the rows.
	CheckCounts = checkCounts
	// Fixture returns n tasks with dependencies and parents, from a
	// fixed seed.
	Fixture = fixture
)

// CheckpointBusy runs a truncating checkpoint of s, a store on a SQLite
// file, and returns whether a reader kept it from finishing: a read
// transaction left open does.
func CheckpointBusy(t testing.TB, s *Store) bool {
	t.Helper()
	if s.Server() != nil {
		t.Fatal("CheckpointBusy: a store on a server has no checkpoints")
	}
	var busy, frames, done int
	if err := s.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done); err != nil {
		t.Fatal(err)
	}
	return busy != 0
}

// LeaseLookFor is leaseLookFor, for the tests of package dag_test.
const LeaseLookFor = leaseLookFor

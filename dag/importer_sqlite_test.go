package dag

import (
	"context"
	"errors"
	"testing"
)

// TestBulkImportFailureRestoresWriter: a bulk import turns SQLite's
// foreign keys off on the writer's connection (see beginWith); one that
// fails, in the middle of a multi-row statement, leaves them on again,
// and CHECK constraints enforced. (TestImportStreamDuplicateInStatement,
// in package dag_test, checks the rest, on both stores.)
func TestBulkImportFailureRestoresWriter(t *testing.T) {
	s := newTestStore(t, newClock(testStart).Now)
	mustAdd(t, s, AddParams{ID: "x"})
	batch := fixture(100)
	batch[69].ID = "x"
	for i := range batch {
		if batch[i].ParentID == "t-70" {
			batch[i].ParentID = ""
		}
		batch[i].BlockedBy = slicesWithout(batch[i].BlockedBy, "t-70")
	}
	if _, err := s.Import(context.Background(), batch); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("import = %v, want the duplicate at line 70", err)
	}
	var fk, checks int
	if err := s.write(context.Background(), func(t *txn) error {
		if err := t.row("PRAGMA foreign_keys").Scan(&fk); err != nil {
			return err
		}
		return t.row("PRAGMA ignore_check_constraints").Scan(&checks)
	}); err != nil || fk != 1 || checks != 0 {
		t.Errorf("writer after a failed import: foreign_keys %d, ignore_check_constraints %d (%v)", fk, checks, err)
	}
}

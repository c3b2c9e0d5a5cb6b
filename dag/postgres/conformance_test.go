package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

var planSeq atomic.Int64

var testRetry = 2 * time.Second

// openPlan makes a plan of its own for a store in the database at url.
func openPlan(t testing.TB, url string, now func() time.Time) *dag.Store {
	t.Helper()
	name := fmt.Sprintf("plan-%d", planSeq.Add(1))
	s, err := postgres.Open(t.Context(), postgres.Config{URL: url, Plan: name, Create: true,
		Options: dag.ServerOptions{Options: dag.Options{Now: now}, RetryFor: testRetry}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// forEachServer runs fn as a subtest "direct", on a database of the test
// server, and as a subtest "pgbouncer", on one reached through PgBouncer
// in transaction pooling (see pooler.go); url is what the store opens,
// direct the same database without the pooler, for the test's own looks.
func forEachServer(t *testing.T, fn func(t *testing.T, url, direct string)) {
	t.Helper()
	t.Run("direct", func(t *testing.T) {
		u := pgtest.URL(t)
		fn(t, u, u)
	})
	t.Run("pgbouncer", func(t *testing.T) {
		pooled, direct := pgtest.Pooled(t)
		fn(t, pooled, direct)
	})
}

func TestConformance(t *testing.T) {
	forEachServer(t, func(t *testing.T, url, _ string) { looptest.TestTaskStore(t, seeded(url)) })
}

func TestLandingConformance(t *testing.T) {
	forEachServer(t, func(t *testing.T, url, _ string) { looptest.TestLandingStore(t, seeded(url)) })
}

func TestRunRecorderConformance(t *testing.T) {
	forEachServer(t, func(t *testing.T, url, _ string) { looptest.TestRunRecorder(t, seeded(url)) })
}

func TestReceiptStoreConformance(t *testing.T) {
	forEachServer(t, func(t *testing.T, url, _ string) { looptest.TestReceiptStore(t, seeded(url)) })
}

// seeded is the StoreFactory of plans on the server at url.
func seeded(url string) looptest.StoreFactory {
	return func(t *testing.T, seeds []looptest.Seed, now func() time.Time) loop.TaskStore {
		t.Helper()
		s := openPlan(t, url, now)
		batch := make([]dag.ImportTask, len(seeds))
		features := map[string]bool{}
		for i, sd := range seeds {
			if sd.Feature != "" && !features[sd.Feature] {
				features[sd.Feature] = true
				if _, err := s.AddFeature(t.Context(), dag.FeatureParams{Name: sd.Feature}); err != nil {
					t.Fatalf("AddFeature: %v", err)
				}
			}
			batch[i] = dag.ImportTask{Line: i + 1, ID: sd.ID, Title: sd.Title, Description: sd.Description,
				Priority: sd.Priority, ParentID: sd.ParentID, BlockedBy: sd.BlockedBy, Status: sd.Status,
				Feature: sd.Feature, Check: sd.Check, CheckBy: sd.CheckBy}
		}
		if _, err := s.Import(t.Context(), batch); err != nil {
			t.Fatalf("Import: %v", err)
		}
		t.Cleanup(func() { checkCounts(t, url, s) })
		return s
	}
}

// checkCounts compares the counts the triggers keep with a count of the
// tasks.
func checkCounts(t testing.TB, url string, s *dag.Store) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Counts(ctx, loop.Scope{})
	if err != nil {
		t.Errorf("Counts: %v", err)
		return
	}
	tasks, err := s.List(ctx, dag.ListParams{})
	if err != nil {
		t.Errorf("List: %v", err)
		return
	}
	var want loop.Counts
	for _, task := range tasks {
		switch task.Status {
		case loop.StatusPending:
			want.Pending++
		case loop.StatusInProgress:
			want.InProgress++
		case loop.StatusDone:
			want.Done++
		case loop.StatusFailed:
			want.Failed++
		case loop.StatusBlocked:
			want.Blocked++
		}
	}
	if got != want {
		t.Errorf("Counts = %+v, tasks say %+v", got, want)
	}
}

package dag_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// The graph rules are one set of code over two stores (ARCHITECTURE.md §6): the
// tests in package dag_test run against each, through forEachStore. The
// tests of what only a SQLite file has (its header, locks, WAL,
// migrations of the file, a read-only directory, a full disk) stay in
// package dag; those of what only a server has, in dag/postgres.

var testStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// newClock is looptest's fake clock, which stands still until advanced.
func newClock(t time.Time) *looptest.Clock { return looptest.NewClock(t) }

// opener makes the stores of one kind for a test.
type opener struct {
	kind   string // "sqlite" or "postgres"
	url    string // postgres: the test's database, a plan per store
	direct string // postgres: the same without a pooler, for the test's own looks

	mu    sync.Mutex
	plans map[*dag.Store]string // postgres: each store's plan
}

var planSeq atomic.Int64

// forEachStore runs fn as a subtest "sqlite", against stores on SQLite
// files, as a subtest "postgres", against plans in a database of the
// test server, and as "pgbouncer", against plans in one reached through
// PgBouncer in transaction pooling (pgtest: skipped without them, failed
// under CI=true).
func forEachStore(t *testing.T, fn func(t *testing.T, o *opener)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, &opener{kind: "sqlite"}) })
	t.Run("postgres", func(t *testing.T) {
		u := pgtest.URL(t)
		fn(t, &opener{kind: "postgres", url: u, direct: u, plans: map[*dag.Store]string{}})
	})
	t.Run("pgbouncer", func(t *testing.T) {
		pooled, direct := pgtest.Pooled(t)
		fn(t, &opener{kind: "postgres", url: pooled, direct: direct, plans: map[*dag.Store]string{}})
	})
}

// open returns a store on a new, empty plan (a file, or a plan on the
// server), closed when t ends.
func (o *opener) open(t testing.TB, now func() time.Time) *dag.Store {
	t.Helper()
	if o.kind == "sqlite" {
		return o.sqlite(t, filepath.Join(t.TempDir(), "progress.db"), now)
	}
	return o.postgres(t, fmt.Sprintf("plan-%d", planSeq.Add(1)), now)
}

// again returns another store on s's plan, as another process (on
// another machine) would open it, closed when t ends.
func (o *opener) again(t testing.TB, s *dag.Store, now func() time.Time) *dag.Store {
	t.Helper()
	if o.kind == "sqlite" {
		return o.sqlite(t, s.Path(), now)
	}
	o.mu.Lock()
	plan := o.plans[s]
	o.mu.Unlock()
	return o.postgres(t, plan, now)
}

func (o *opener) sqlite(t testing.TB, path string, now func() time.Time) *dag.Store {
	t.Helper()
	s, err := dag.Open(t.Context(), path, dag.Options{Now: now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (o *opener) postgres(t testing.TB, plan string, now func() time.Time) *dag.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Config{URL: o.url, Plan: plan, Create: true,
		Options: dag.ServerOptions{Options: dag.Options{Now: now}, RetryFor: 5 * time.Second}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	o.mu.Lock()
	o.plans[s] = plan
	o.mu.Unlock()
	t.Cleanup(func() { s.Close() })
	return s
}

// checkNoReadOpen fails t if a read transaction of s is still open: on
// SQLite it would keep a checkpoint from truncating the log; on a server,
// a connection of the database would sit idle in a transaction.
func (o *opener) checkNoReadOpen(t testing.TB, s *dag.Store) {
	t.Helper()
	if o.kind == "sqlite" {
		if dag.CheckpointBusy(t, s) {
			t.Errorf("a reader kept the checkpoint from truncating the log: a read transaction is open")
		}
		return
	}
	conn, err := pgx.Connect(t.Context(), o.direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var open []string
	rows, err := conn.Query(t.Context(), `SELECT query FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`)
	if err != nil {
		t.Fatal(err)
	}
	if open, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(open) > 0 {
		t.Errorf("connections idle in a transaction, last statements: %s", strings.Join(open, "; "))
	}
}

// mustAdd adds tasks (id, then parent/blockers in params) or fails the test.
func mustAdd(t testing.TB, s *dag.Store, ps ...dag.AddParams) {
	t.Helper()
	for _, p := range ps {
		if p.Title == "" {
			p.Title = "task " + p.ID
		}
		if _, err := s.Add(context.Background(), p); err != nil {
			t.Fatalf("Add(%s): %v", p.ID, err)
		}
	}
}

func statuses(t testing.TB, s *dag.Store) map[string]loop.Status {
	t.Helper()
	m := map[string]loop.Status{}
	for _, task := range mustList(t, s) {
		m[task.ID] = task.Status
	}
	return m
}

func readyIDs(t testing.TB, s *dag.Store) []string {
	t.Helper()
	ts, err := s.Ready(context.Background(), loop.Scope{}, 0)
	if err != nil {
		t.Fatalf("Ready: %v", err)
	}
	var ids []string
	for _, task := range ts {
		ids = append(ids, task.ID)
	}
	return ids
}

func mustList(t testing.TB, s *dag.Store) []loop.Task {
	t.Helper()
	ts, err := s.List(context.Background(), dag.ListParams{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return ts
}

func claimAndDo(t testing.TB, s *dag.Store, id string, do func(id string) error) {
	t.Helper()
	if _, err := s.Claim(context.Background(), loop.ClaimParams{TaskID: id, Agent: "agent-t"}); err != nil {
		t.Fatalf("Claim(%s): %v", id, err)
	}
	if err := do(id); err != nil {
		t.Fatalf("%s: %v", id, err)
	}
}

package dag

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

var testStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// newClock is looptest's fake clock, which stands still until advanced.
func newClock(t time.Time) *looptest.Clock { return looptest.NewClock(t) }

// newTestStore opens a fresh database in a temporary directory, closed when
// the test ends.
func newTestStore(t testing.TB, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "progress.db"), Options{Now: now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readTx begins a read transaction for a test's own queries of the
// store's tables: on a server behind a pooler, the plan's search path
// comes with a transaction. Roll it back when done.
func readTx(t testing.TB, s *Store) *sql.Tx {
	t.Helper()
	tx, err := s.db.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// dump returns every row of every table, in a stable order, so that a test
// can check that a failed call left the database exactly as it was. The
// query is the same on a server (the plan's tables, through the store's
// pool).
func dump(t testing.TB, s *Store) []string {
	t.Helper()
	tx := readTx(t, s)
	defer tx.Rollback()
	var out []string
	for _, table := range []string{"features", "tasks", "deps", "task_logs", "receipts", "status_counts", "plan_settings"} {
		rows, err := tx.QueryContext(context.Background(), "SELECT * FROM "+table+" ORDER BY 1, 2")
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("dump %s: %v", table, err)
			}
			out = append(out, fmt.Sprintf("%s%v", table, vals))
		}
		if err := rows.Close(); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
	}
	return out
}

// checkCounts compares the trigger-kept status_counts and the readiness
// counters kept on each task with values recomputed from the rows, and
// checks that every reference names a task (an import writes with foreign
// keys off on SQLite). Its queries are the same on a server (the plan's
// tables, through the store's pool), but for SQLite's own foreign key
// check.
func checkCounts(t testing.TB, s *Store) {
	t.Helper()
	if s.Server() == nil {
		if rows, err := s.db.Query("PRAGMA foreign_key_check"); err != nil {
			t.Fatal(err)
		} else {
			for rows.Next() {
				var table, parent string
				var rowid, fk any
				if err := rows.Scan(&table, &rowid, &parent, &fk); err != nil {
					t.Fatal(err)
				}
				t.Errorf("foreign key check: %s row %v names a missing %s", table, rowid, parent)
			}
			rows.Close()
		}
	}
	tx := readTx(t, s)
	defer tx.Rollback()
	for _, ref := range []struct{ what, q string }{
		{"parent", `SELECT id, parent_id FROM tasks t WHERE parent_id IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM tasks p WHERE p.id = t.parent_id)`},
		{"feature", `SELECT id, feature FROM tasks t WHERE feature IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM features f WHERE f.name = t.feature)`},
		{"blocked task", `SELECT blocker_id, blocked_id FROM deps d WHERE NOT EXISTS (SELECT 1 FROM tasks b WHERE b.id = d.blocked_id)`},
		{"blocker", `SELECT blocked_id, blocker_id FROM deps d WHERE NOT EXISTS (SELECT 1 FROM tasks b WHERE b.id = d.blocker_id)`},
		{"task of a log entry", `SELECT kind, task_id FROM task_logs l WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = l.task_id)`},
	} {
		rows, err := tx.Query(ref.q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var from, to string
			if err := rows.Scan(&from, &to); err != nil {
				t.Fatal(err)
			}
			t.Errorf("reference check: %s names a missing %s %s", from, ref.what, to)
		}
		rows.Close()
	}
	read := func(q string) map[string]int {
		rows, err := tx.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var feature, status string
			var n int
			if err := rows.Scan(&feature, &status, &n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				m[feature+"/"+status] = n
			}
		}
		return m
	}
	// 'pending' counts the in_progress tasks too.
	want := read(`SELECT coalesce(feature, ''), CASE status WHEN 'in_progress' THEN 'pending' ELSE status END, count(*)
		FROM tasks GROUP BY 1, 2`)
	got := read(`SELECT feature, status, sum(n) FROM status_counts GROUP BY feature, status`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status_counts out of step with tasks (-tasks +status_counts):\n%s", diff)
	}
	// Every counter kept on write, recomputed from scratch.
	rows, err := tx.Query(`SELECT id, blocker_count, dependent_count, unmet_blockers, child_count, parent_failed,
		(SELECT count(*) FROM deps WHERE blocked_id = t.id),
		(SELECT count(*) FROM deps WHERE blocker_id = t.id),
		(SELECT count(*) FROM deps d JOIN tasks b ON b.id = d.blocker_id WHERE d.blocked_id = t.id AND b.status <> 'done'),
		(SELECT count(*) FROM tasks c WHERE c.parent_id = t.id),
		(SELECT count(*) FROM tasks p WHERE p.id = t.parent_id AND p.status = 'failed')
		FROM tasks t ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var kept, fresh [5]int
		if err := rows.Scan(&id, &kept[0], &kept[1], &kept[2], &kept[3], &kept[4],
			&fresh[0], &fresh[1], &fresh[2], &fresh[3], &fresh[4]); err != nil {
			t.Fatal(err)
		}
		if kept != fresh {
			t.Errorf("task %s: counters (blockers, dependents, unmet, children, parent failed) kept %v, recomputed %v", id, kept, fresh)
		}
	}
	rows.Close()
	checkChains(t, s)
}

// checkChains checks each task's chain (dag/chain.go) against the longest
// path of what waits for it, recomputed from the rows by a depth-first
// search.
func checkChains(t testing.TB, s *Store) {
	t.Helper()
	tx := readTx(t, s)
	defer tx.Rollback()
	succ := map[string][]string{}
	kept := map[string]int{}
	rows, err := tx.Query(`SELECT id, coalesce(parent_id, ''), chain FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, parent string
		var chain int
		if err := rows.Scan(&id, &parent, &chain); err != nil {
			t.Fatal(err)
		}
		kept[id] = chain
		if parent != "" {
			succ[id] = append(succ[id], parent)
		}
	}
	rows.Close()
	rows, err = tx.Query(`SELECT blocker_id, blocked_id FROM deps`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var blocker, blocked string
		if err := rows.Scan(&blocker, &blocked); err != nil {
			t.Fatal(err)
		}
		succ[blocker] = append(succ[blocker], blocked)
	}
	rows.Close()
	fresh := map[string]int{}
	var walk func(id string) int
	walk = func(id string) int {
		if c, ok := fresh[id]; ok {
			return c
		}
		c := 1
		for _, n := range succ[id] {
			c = max(c, 1+walk(n))
		}
		fresh[id] = c
		return c
	}
	for id, c := range kept {
		if w := walk(id); w != c {
			t.Errorf("task %s: chain kept %d, recomputed %d", id, c, w)
		}
	}
}

// mustAdd adds tasks (id, then parent/blockers in params) or fails the test.
func mustAdd(t testing.TB, s *Store, ps ...AddParams) {
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

func statuses(t testing.TB, s *Store) map[string]loop.Status {
	t.Helper()
	ts, err := s.List(context.Background(), ListParams{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	m := map[string]loop.Status{}
	for _, task := range ts {
		m[task.ID] = task.Status
	}
	return m
}

func TestOpenCreatesAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, AddParams{ID: "a"})
	var version, appID int
	var mode string
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow("PRAGMA application_id").Scan(&appID); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{SchemaVersion(), applicationID, "wal"}, []any{version, appID, mode}); diff != "" {
		t.Errorf("version, application id, journal mode (-want +got):\n%s", diff)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	s.Close()
	s, err = OpenExisting(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if diff := cmp.Diff(map[string]loop.Status{"a": loop.StatusPending}, statuses(t, s)); diff != "" {
		t.Errorf("after reopening (-want +got):\n%s", diff)
	}
}

func TestOpenBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rawDB := func(name string, stmts ...string) string {
		p := filepath.Join(dir, name)
		db, err := sql.Open("sqlite", p)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range stmts {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	newer := filepath.Join(dir, "newer.db")
	s, err := Open(t.Context(), newer, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion()+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	sqliteHeader := []byte("SQLite format 3\x00")
	corrupt := append(append([]byte{}, sqliteHeader...), make([]byte, 4096)...)
	for i := 16; i < len(corrupt); i++ {
		corrupt[i] = byte(i * 7)
	}

	tests := []struct {
		name     string
		path     string
		existing bool
		want     error
	}{
		{"text file", write("notes.db", []byte(strings.Repeat("hello, this is not a database\n", 200))), false, ErrNotADatabase},
		{"garbage after a SQLite header", write("corrupt.db", corrupt), false, ErrNotADatabase},
		{"another application's database", rawDB("other.db", "CREATE TABLE users (name TEXT)"), false, ErrNotADatabase},
		{"foreign application id", rawDB("appid.db", "PRAGMA application_id = 42", "CREATE TABLE x (y)"), false, ErrNotADatabase},
		{"a directory", dir, false, ErrNotADatabase},
		{"schema newer than this ralph", newer, false, ErrSchemaTooNew},
		{"missing file, OpenExisting", filepath.Join(dir, "missing.db"), true, fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := os.ReadFile(tt.path)
			open := Open
			if tt.existing {
				open = OpenExisting
			}
			s, err := open(t.Context(), tt.path, Options{})
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s) succeeded, want %v", tt.path, tt.want)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Open: %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("error %q does not name the path %s", err, tt.path)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one line", err)
			}
			after, _ := os.ReadFile(tt.path)
			if tt.path != dir && string(before) != string(after) {
				t.Errorf("Open changed the file")
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenExisting created the file: %v", err)
	}
}

// TestMigrationsInSequence guards the embedded migrations: numbered from
// 0001 without gaps, each applied once.
func TestMigrationsInSequence(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || SchemaVersion() != len(ms) {
		t.Fatalf("SchemaVersion() = %d with %d migrations", SchemaVersion(), len(ms))
	}
	// A database at version 0 with nothing in it is migrated; opening it
	// again applies nothing.
	path := filepath.Join(t.TempDir(), "p.db")
	for range 2 {
		s, err := Open(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

func TestLockedBeyondBusyTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.db")
	s, err := Open(t.Context(), path, Options{BusyTimeout: 50 * time.Millisecond, Now: func() time.Time { return testStart }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustAdd(t, s, AddParams{ID: "a"})
	before := dump(t, s)

	// Another "process": its own connection holding the write lock.
	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(50)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("UPDATE tasks SET title = 'held' WHERE id = 'a'"); err != nil {
		t.Fatal(err)
	}

	writes := []struct {
		name string
		call func() error
	}{
		{"Add", func() error { _, err := s.Add(t.Context(), AddParams{Title: "b"}); return err }},
		{"Claim", func() error { _, err := s.Claim(t.Context(), loop.ClaimParams{Agent: "x"}); return err }},
		{"Block", func() error { return s.Block(t.Context(), loop.MoveParams{TaskID: "a", Message: "r"}) }},
		{"Import", func() error { _, err := s.Import(t.Context(), []ImportTask{{ID: "c", Title: "c"}}); return err }},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			err := w.call()
			if !errors.Is(err, ErrLocked) {
				t.Fatalf("%s under another process's write lock: %v, want ErrLocked", w.name, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "locked by another process") || !strings.Contains(msg, path) {
				t.Errorf("error %q does not say the database %s is locked by another process", msg, path)
			}
		})
	}
	// Reads do not wait for writers in WAL mode.
	if _, err := s.Ready(t.Context(), loop.Scope{}, 10); err != nil {
		t.Errorf("Ready while another process writes: %v", err)
	}
	tx.Rollback()
	if diff := cmp.Diff(before, dump(t, s)); diff != "" {
		t.Errorf("database changed (-before +after):\n%s", diff)
	}
}

// TestWriteLockBetweenStores holds the writers' lock of one Store while
// another Store of the same file (as another process would) writes: the
// write waits for the busy timeout, then fails with ErrLocked; a cancelled
// context ends the wait early; once released, writes go through.
func TestWriteLockBetweenStores(t *testing.T) {
	if !flockSupported {
		t.Skip("no flock(2) on this platform: writers are ordered by SQLite alone")
	}
	path := filepath.Join(t.TempDir(), "progress.db")
	holder, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	other, err := Open(t.Context(), path, Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	release, err := holder.wlock.acquire(t.Context(), time.Second, holder.lockedErr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Add(t.Context(), AddParams{Title: "x"}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Errorf("Add while another store holds the lock: %v, want ErrLocked naming %s", err, path)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go cancel()
	other.busy = time.Minute
	if _, err := other.Add(ctx, AddParams{Title: "x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Add with a cancelled context while locked: %v, want context.Canceled", err)
	}
	release(nil)
	if _, err := other.Add(t.Context(), AddParams{Title: "x"}); err != nil {
		t.Errorf("Add after the lock was released: %v", err)
	}
	if got := statuses(t, holder); len(got) != 1 {
		t.Errorf("tasks = %v, want exactly the one added after the release", got)
	}
}

// TestForwardMigration makes a version-1 database with a version-1 build,
// then opens it with a build that knows every later migration and a
// made-up last one: each migration runs once, the data survives and works
// with the new schema, and an older build then refuses the file.
func TestForwardMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.db")
	read := func(name string) []byte {
		b, err := fs.ReadFile(embeddedMigrations, name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	v1 := read("migrations/0001_init.sql")
	defer func() { migrationFS = embeddedMigrations }()
	migrationFS = fstest.MapFS{"migrations/0001_init.sql": {Data: v1}}
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO tasks (id, title, priority, created_at, updated_at) VALUES ('a', 'A', 2, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	all, err := fs.Glob(embeddedMigrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	newer := fstest.MapFS{}
	for _, name := range all {
		newer[name] = &fstest.MapFile{Data: read(name)}
	}
	last := len(all) + 1
	newer[fmt.Sprintf("migrations/%04d_extra.sql", last)] = &fstest.MapFile{Data: []byte("ALTER TABLE tasks ADD COLUMN extra TEXT NOT NULL DEFAULT 'x';")}
	migrationFS = newer
	for range 2 { // the second open applies nothing
		s, err = Open(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var version int
		var extra string
		if err := s.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
			t.Fatal(err)
		}
		if err := s.db.QueryRow("SELECT extra FROM tasks WHERE id = 'a'").Scan(&extra); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]any{last, "x"}, []any{version, extra}); diff != "" {
			t.Errorf("after migrating (-want +got):\n%s", diff)
		}
		s.Close()
	}
	// The old task works with the new columns: a claim records its
	// holder and generation.
	s, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(t.Context(), loop.ClaimParams{TaskID: "a", Agent: "agent-a", Holder: loop.ThisProcess(), Mode: loop.ClaimLoop})
	if err != nil || got.Generation != 1 || got.Holder != loop.ThisProcess() || got.ClaimMode != loop.ClaimLoop {
		t.Errorf("claim after the migration: %+v, %v", got, err)
	}
	s.Close()

	migrationFS = fstest.MapFS{"migrations/0001_init.sql": {Data: v1}, "migrations/0002_claims.sql": {Data: read("migrations/0002_claims.sql")}}
	if _, err := Open(t.Context(), path, Options{}); !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), path) {
		t.Errorf("version-2 build opening a version-%d file: %v, want ErrSchemaTooNew naming the path", last, err)
	}
}

// TestConcurrentOpenOfNewFile opens one new file from 8 stores at once (as
// 8 processes would): each succeeds and the schema is created once.
func TestConcurrentOpenOfNewFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.db")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(t.Context(), path, Options{})
			if err == nil {
				_, err = s.Add(t.Context(), AddParams{Title: fmt.Sprintf("from store %d", i)})
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("store %d: %v", i, err)
		}
	}
	s, err := OpenExisting(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := len(statuses(t, s)); got != 8 {
		t.Errorf("%d tasks, want 8", got)
	}
	checkCounts(t, s)
}

// A read never fails, nor waits long, because the claims it would recover
// first cannot be written back: here a dead holder's claim awaits
// recovery while another store holds the write lock for seconds. The next
// read after the lock is free recovers it.
func TestReadDoesNotWaitToRecover(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.db")
	a, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mustAdd(t, a, AddParams{ID: "x"})
	if _, err := a.Claim(t.Context(), loop.ClaimParams{TaskID: "x", Agent: "agent-dead", Holder: looptest.DeadHolder(t), Mode: loop.ClaimLoop}); err != nil {
		t.Fatal(err)
	}
	locker, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	_, end, err := locker.begin(t.Context(), txOpts{})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := OpenExisting(t.Context(), path, Options{BusyTimeout: 10 * time.Second})
	if err != nil {
		end()
		t.Fatal(err)
	}
	defer reader.Close()
	start := time.Now()
	tasks, err := reader.List(t.Context(), ListParams{})
	took := time.Since(start)
	end()
	if err != nil || len(tasks) != 1 || took > 2*time.Second {
		t.Fatalf("List with the lock held: %d tasks, %v, after %v; want the task at once", len(tasks), err, took)
	}
	if tasks[0].Status != loop.StatusInProgress {
		t.Errorf("x is %s; the locked store cannot have recovered it yet", tasks[0].Status)
	}
	// Once the lock is free a read recovers it. Each read waits for the
	// lock only readRecoverWait: on a loaded machine (the race detector,
	// every package's tests at once) one may give up, and the next tries
	// again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := reader.Get(t.Context(), "x")
		if err == nil && got.Status == loop.StatusPending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the lock: x is %s, %v; want pending (holder-gone)", got.Status, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestChainMigration: a plan made before schema version 10 gets each
// task's chain computed by the migration: a chain of three with a parent
// below it, and tasks nothing waits for.
func TestChainMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.db")
	all, err := fs.Glob(embeddedMigrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	for _, name := range all {
		if name < "migrations/0010_" { // the schema before version 10
			b, err := fs.ReadFile(embeddedMigrations, name)
			if err != nil {
				t.Fatal(err)
			}
			before[name] = &fstest.MapFile{Data: b}
		}
	}
	defer func() { migrationFS = embeddedMigrations }()
	migrationFS = before
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// epic ← sub ← {c1, c2}; c1 waits for a, b waits for a; lone waits
	// for nothing. Chains: epic 1, sub 2, c1 3, c2 3, a 4, b 1, lone 1.
	if _, err := s.db.Exec(`
		INSERT INTO tasks (id, title, priority, parent_id, created_at, updated_at, child_count, blocker_count, dependent_count, unmet_blockers) VALUES
			('epic', 'E', 2, NULL, 1, 1, 1, 0, 0, 0),
			('sub', 'S', 2, 'epic', 1, 1, 2, 0, 0, 0),
			('a', 'A', 2, NULL, 1, 1, 0, 0, 2, 0),
			('c1', 'C1', 2, 'sub', 1, 1, 0, 1, 0, 1),
			('c2', 'C2', 2, 'sub', 1, 1, 0, 0, 0, 0),
			('b', 'B', 2, NULL, 1, 1, 0, 1, 0, 1),
			('lone', 'L', 2, NULL, 1, 1, 0, 0, 0, 0);
		INSERT INTO deps (blocked_id, blocker_id) VALUES ('c1', 'a'), ('b', 'a');`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	migrationFS = embeddedMigrations
	if s, err = Open(t.Context(), path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkCounts(t, s)
	got := map[string]int{}
	rows, err := s.db.Query(`SELECT id, chain FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var c int
		if err := rows.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		got[id] = c
	}
	want := map[string]int{"epic": 1, "sub": 2, "c1": 3, "c2": 3, "a": 4, "b": 1, "lone": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chains after the migration (-want +got):\n%s", diff)
	}
	// The ready order: a (4), then c2 (3), then lone (b waits for a).
	ready, err := s.Ready(t.Context(), loop.Scope{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range ready {
		ids = append(ids, task.ID)
	}
	if diff := cmp.Diff([]string{"a", "c2", "lone"}, ids); diff != "" {
		t.Errorf("ready after the migration (-want +got):\n%s", diff)
	}
}

package dag_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/loop"
)

// readOnly opens s's plan again with Options.ReadOnly, as ralph serve does.
func (o *opener) readOnly(t *testing.T, s *dag.Store, now func() time.Time) *dag.Store {
	t.Helper()
	var ro *dag.Store
	var err error
	if o.kind == "sqlite" {
		ro, err = dag.OpenExisting(t.Context(), s.Path(), dag.Options{Now: now, ReadOnly: true})
	} else {
		o.mu.Lock()
		plan := o.plans[s]
		o.mu.Unlock()
		ro, err = postgres.Open(t.Context(), postgres.Config{URL: o.url, Plan: plan,
			Options: dag.ServerOptions{Options: dag.Options{Now: now, ReadOnly: true}}})
	}
	if err != nil {
		t.Fatalf("open read-only: %v", err)
	}
	t.Cleanup(func() { ro.Close() })
	return ro
}

// A store opened read-only reads what other stores write, recovers no
// expired claim when it reads, and refuses every write.
func TestReadOnlyStore(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		clock := newClock(testStart)
		rw := o.open(t, clock.Now)
		mustAdd(t, rw, dag.AddParams{ID: "a"}, dag.AddParams{ID: "b"})
		if _, err := rw.Claim(t.Context(), loop.ClaimParams{TaskID: "a", Agent: "agent-1", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		ro := o.readOnly(t, rw, clock.Now)

		clock.Advance(time.Hour) // a's lease has long expired
		a, err := ro.Get(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != loop.StatusInProgress || a.ClaimedBy != "agent-1" {
			t.Errorf("a read-only read recovered the expired claim: a is %s, claimed by %q", a.Status, a.ClaimedBy)
		}
		var n int
		if err := ro.EachTask(t.Context(), dag.ListParams{}, func(loop.Task) error { n++; return nil }); err != nil || n != 2 {
			t.Errorf("EachTask: %d tasks, %v; want 2", n, err)
		}

		writes := map[string]func() error{
			"Add":   func() error { _, err := ro.Add(t.Context(), dag.AddParams{ID: "c", Title: "c"}); return err },
			"Claim": func() error { _, err := ro.Claim(t.Context(), loop.ClaimParams{Agent: "x"}); return err },
			"Complete": func() error {
				return ro.Complete(t.Context(), loop.MoveParams{TaskID: "b", Message: "done"})
			},
			"Recover": func() error { _, err := ro.Recover(t.Context()); return err },
			"RecordReceipt": func() error {
				return ro.RecordReceipt(t.Context(), loop.Receipt{Session: "s", Iteration: 1})
			},
		}
		for name, w := range writes {
			if err := w(); !errors.Is(err, dag.ErrReadOnly) {
				t.Errorf("%s on a read-only store: %v, want ErrReadOnly", name, err)
			}
		}

		// What another store writes is seen.
		mustAdd(t, rw, dag.AddParams{ID: "d"})
		if d, err := ro.Get(t.Context(), "d"); err != nil || d.Status != loop.StatusPending {
			t.Errorf("after another store added d, the read-only store reads %+v, %v", d, err)
		}
		if _, err := ro.Get(t.Context(), "c"); err == nil {
			t.Error("the refused Add added c")
		}
	})
}

// A read-only open makes nothing: no file where there was none.
func TestReadOnlyOpenMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.db")
	for _, open := range []func() (*dag.Store, error){
		func() (*dag.Store, error) { return dag.Open(t.Context(), path, dag.Options{ReadOnly: true}) },
		func() (*dag.Store, error) { return dag.OpenExisting(t.Context(), path, dag.Options{ReadOnly: true}) },
	} {
		s, err := open()
		if err == nil {
			s.Close()
			t.Fatal("read-only open of a missing file succeeded")
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error %v, want fs.ErrNotExist", err)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a read-only open made %s", path)
		}
	}
}

// A read-only store opened while no other has the file open (no shared
// memory file yet) still sees what is written later.
func TestReadOnlySeesLaterWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.db")
	rw, err := dag.Open(t.Context(), path, dag.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, rw, dag.AddParams{ID: "a"})
	rw.Close()
	ro, err := dag.OpenExisting(t.Context(), path, dag.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Get(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	rw, err = dag.Open(t.Context(), path, dag.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	mustAdd(t, rw, dag.AddParams{ID: "b"})
	if _, err := ro.Get(t.Context(), "b"); err != nil {
		t.Errorf("the read-only store does not see a later write: %v", err)
	}
}

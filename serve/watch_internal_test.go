package serve

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// testWatcher exercises a file watcher: a write to the database's
// write-ahead log and a line in a session's event log are reported.
func testWatcher(t *testing.T, watch func(ctx context.Context, dbPath, logDir string, changes chan<- change)) {
	dir := t.TempDir()
	db := filepath.Join(dir, "progress.db")
	logDir := filepath.Join(dir, "logs")
	const sess = "session-20261124-060000"
	if err := os.WriteFile(db, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(logDir, sess), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loop.EventLogPath(logDir, sess), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	changes := make(chan change, 16)
	done := make(chan struct{})
	go func() {
		watch(ctx, db, logDir, changes)
		close(done)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the watcher did not stop within 10 s of its context's end")
		}
	}()
	wait := func(what string, ok func(change) bool, act func()) {
		t.Helper()
		// The watcher may not be watching yet: act again until it sees.
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		act()
		for {
			select {
			case c := <-changes:
				if ok(c) {
					return
				}
			case <-tick.C:
				act()
			case <-deadline:
				t.Fatalf("%s: not reported within 10 s", what)
			}
		}
	}
	n := 0
	wait("a write to the WAL", func(c change) bool { return c.db }, func() {
		n++
		os.WriteFile(db+"-wal", make([]byte, n), 0o644)
	})
	wait("an event log line", func(c change) bool { return c.session == sess }, func() {
		f, err := os.OpenFile(loop.EventLogPath(logDir, sess), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			f.WriteString("{}\n")
			f.Close()
		}
	})
	const later = "session-20261124-060500"
	wait("a new session", func(c change) bool { return c.session == later }, func() {
		os.MkdirAll(filepath.Join(logDir, later), 0o755)
		f, err := os.OpenFile(loop.EventLogPath(logDir, later), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			f.WriteString("{}\n")
			f.Close()
		}
	})
}

func TestWatchFiles(t *testing.T) {
	testWatcher(t, func(ctx context.Context, d, l string, c chan<- change) { watchFiles(ctx, d, l, l, c, func() {}) })
}

// The fallback where inotify is not to be had.
func TestPollFiles(t *testing.T) {
	testWatcher(t, func(ctx context.Context, d, l string, c chan<- change) { pollFiles(ctx, d, l, l, c, func() {}) })
}

// emptyStore is a plan with no task, no history and no receipt.
type emptyStore struct{}

func (emptyStore) EachTask(context.Context, dag.ListParams, func(loop.Task) error) error { return nil }
func (emptyStore) Get(context.Context, string) (loop.Task, error) {
	return loop.Task{}, loop.ErrNotFound
}
func (emptyStore) Logs(context.Context, string) ([]loop.LogEntry, error) { return nil, nil }
func (emptyStore) Receipts(context.Context, int) ([]loop.Receipt, error) { return nil, nil }

// A client dropped for falling behind (a laptop asleep) that was the last
// one stops the watcher when its stream ends: nothing watches for nobody.
func TestWatcherStopsAfterDroppedClient(t *testing.T) {
	s, err := New(Config{Store: emptyStore{}, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := s.hub.subscribe()
	for i := 0; i <= clientBuffer; i++ { // nobody reads c.ch
		s.hub.broadcast("plan", i)
	}
	for range c.ch { // closed when it was dropped
	}
	s.hub.unsubscribe(c) // what the stream's handler does as it returns
	s.hub.mu.Lock()
	running, n := s.hub.cancel != nil, len(s.hub.clients)
	s.hub.mu.Unlock()
	if running || n != 0 {
		t.Errorf("watcher running: %v, with %d clients; want it stopped with none", running, n)
	}
}

package serve

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

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

func TestWatchFiles(t *testing.T) { testWatcher(t, watchFiles) }

// The fallback where inotify is not to be had.
func TestPollFiles(t *testing.T) { testWatcher(t, pollFiles) }

package serve

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/safefile"
)

// pollEvery is how often pollFiles looks at the files.
const pollEvery = time.Second

// pollFiles reports changes by looking at the files every pollEvery (a few
// stat calls): where inotify is not to be had.
func pollFiles(ctx context.Context, dbPath, base, logDir string, changes chan<- change, ready func()) {
	state := func(paths ...string) string {
		s := ""
		for _, p := range paths {
			if fi, err := os.Stat(p); err == nil {
				s += fmt.Sprintf("%d.%d;", fi.Size(), fi.ModTime().UnixNano())
			} else {
				s += "-;"
			}
		}
		return s
	}
	dbState := ""
	if dbPath != "" {
		dbState = state(dbPath, dbPath+"-wal")
	}
	logs := map[string]string{}
	look := func(first bool) {
		names, _ := recentSessions(base, logDir, maxSessions)
		for _, n := range names {
			st := logState(base, loop.EventLogPath(logDir, n))
			if old, ok := logs[n]; (ok || !first) && old != st {
				send(ctx, changes, change{session: n})
			}
			logs[n] = st
		}
	}
	look(true)
	ready()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if dbPath != "" {
			if st := state(dbPath, dbPath+"-wal"); st != dbState {
				dbState = st
				send(ctx, changes, change{db: true})
			}
		}
		look(false)
	}
}

// logState is what pollFiles compares of an event log, looked at without
// following a link (package safefile).
func logState(base, path string) string {
	if fi, err := safefile.Lstat(base, path); err == nil {
		return fmt.Sprintf("%d.%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return "-;"
}

package dag

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.ChangeWatcher = (*Store)(nil)

// watchEvery is how often WaitChange looks at the database's files.
const watchEvery = 50 * time.Millisecond

// ChangeToken implements loop.ChangeWatcher without a query: the size and
// modification time of the database file and of its write-ahead log, one
// of which every commit, by any process, changes.
func (s *Store) ChangeToken(ctx context.Context) (string, error) {
	if s.srv != nil {
		return s.srv.ChangeToken(ctx)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return s.fileState(), nil
}

func (s *Store) fileState() string {
	state := ""
	for _, p := range []string{s.path, s.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			state += fmt.Sprintf("%d.%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			state += "-;"
		}
	}
	return state
}

// WaitChange implements loop.ChangeWatcher: it looks at the files every
// watchEvery (two stat calls; the database itself is not read).
func (s *Store) WaitChange(ctx context.Context, token string, d time.Duration) (bool, error) {
	if s.srv != nil {
		return s.srv.WaitChange(ctx, token, d)
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	for {
		if s.fileState() != token {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-tick.C:
		}
	}
}

// ViewChanges returns what a viewer of a plan on a server watches: the
// changes its ChangeWatcher reports and each claim, which waiting loops are
// not told of (ARCHITECTURE.md §6: a notification queues the claims'
// commits) but a viewer wants to show at once. It is nil for a plan in a
// file, whose every commit, claims included, moves the file ChangeToken
// reads.
func (s *Store) ViewChanges() loop.ChangeWatcher {
	if s.srv == nil {
		return nil
	}
	return s.srv.ViewChanges()
}

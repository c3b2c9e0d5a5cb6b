package dag

import (
	"context"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.ChangeWatcher = (*Store)(nil)

// watchEvery is how often WaitChange looks at a SQLite database's files.
const watchEvery = 50 * time.Millisecond

// ChangeToken implements loop.ChangeWatcher. On a SQLite file it costs no
// query: the size and modification time of the database file and of its
// write-ahead log, one of which every commit, by any process, changes. On
// a server it is the server's (Server's loop.ChangeWatcher).
func (s *Store) ChangeToken(ctx context.Context) (string, error) {
	return s.d.changeToken(ctx)
}

// WaitChange implements loop.ChangeWatcher: on a SQLite file it looks at
// the files every watchEvery (two stat calls; the database itself is not
// read); on a server it waits for the server's word.
func (s *Store) WaitChange(ctx context.Context, token string, d time.Duration) (bool, error) {
	return s.d.waitChange(ctx, token, d)
}

// ViewChanges returns what a viewer of a plan on a server watches: the
// changes its ChangeWatcher reports and each claim, which waiting loops are
// not told of (ARCHITECTURE.md §6: a notification queues the claims'
// commits) but a viewer wants to show at once. It is nil for a plan in a
// file, whose every commit, claims included, moves the file ChangeToken
// reads.
func (s *Store) ViewChanges() loop.ChangeWatcher {
	return s.d.viewChanges()
}

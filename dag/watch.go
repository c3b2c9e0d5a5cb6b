package dag

import (
	"context"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.ChangeWatcher = (*Store)(nil)

// watchEvery is how often WaitChange looks at a SQLite database's files
// when nothing woke it sooner and no file watcher tells of other
// processes' writes; watchedEvery when one does (a database in WAL mode
// is shared by processes of one machine only, whose writes the watcher
// sees: the look is a safety net, and a waiting loop need not wake 20
// times a second for it).
const (
	watchEvery   = 50 * time.Millisecond
	watchedEvery = time.Second
)

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

// changes wakes a store's waits (WaitChange) when the plan may have
// changed: at each commit of the store itself, so the workers of one
// build hear each other at once, and, on a SQLite file, where the
// platform tells of writes to files (inotify on Linux), at each write of
// the database or its log by any process. A wake only makes a wait look
// again; on a file the files' state decides, and a wait also looks every
// watchEvery, so a wake missed (a file system that tells nothing, as
// NFS) costs at most that.
type changes struct {
	mu      sync.Mutex
	ch      chan struct{} // closed at the next wake; made by the first waiter
	watch   io.Closer     // the file watcher, once started; nil where none
	watched bool          // the file watcher was started (or failed to)
	closed  bool
}

// wake wakes the waiters. It costs a lock when nobody waits.
func (c *changes) wake() {
	c.mu.Lock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
	c.mu.Unlock()
}

// next returns a channel closed at the next wake.
func (c *changes) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// watchFiles starts, once, watching the files of the database at path,
// and returns how often a wait should still look at them: watchedEvery
// with a watcher, watchEvery without.
func (c *changes) watchFiles(path string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.watched && !c.closed {
		c.watched = true
		base := filepath.Base(path)
		c.watch, _ = watchFiles(filepath.Dir(path), []string{base, base + "-wal"}, c.wake)
	}
	if c.watch != nil {
		return watchedEvery
	}
	return watchEvery
}

// close stops the file watcher.
func (c *changes) close() {
	c.mu.Lock()
	w := c.watch
	c.closed, c.watch = true, nil
	c.mu.Unlock()
	if w != nil {
		w.Close()
	}
}

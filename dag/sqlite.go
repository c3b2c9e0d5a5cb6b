package dag

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/ralph-dev/ralph/loop"
)

// sqliteDialect is the driver of a plan in a SQLite file: the rules'
// queries run as they are written, a write transaction holds the whole
// database from its BEGIN IMMEDIATE (no plan lock, no row locks), and
// nothing is retried but by SQLite's busy handler.
type sqliteDialect struct{ s *Store }

var _ dialect = sqliteDialect{}

func (sqliteDialect) rebind(q string) string          { return q }
func (sqliteDialect) lock(*txn) error                 { return nil }
func (sqliteDialect) forUpdate() string               { return "" }
func (sqliteDialect) skipLocked() string              { return "" }
func (sqliteDialect) beforeCommit(*txn) error         { return nil }
func (sqliteDialect) reachesQuery() string            { return reachesQuery }
func (sqliteDialect) listBlockers() string            { return "" }
func (sqliteDialect) featureFiles() error             { return ErrNoFeatureFiles }
func (sqliteDialect) server() Server                  { return nil }
func (sqliteDialect) readTx() bool                    { return true }
func (sqliteDialect) txID() string                    { return "" }
func (d sqliteDialect) committed()                    { d.s.changes.wake() }
func (sqliteDialect) viewChanges() loop.ChangeWatcher { return nil }

// guardStatement: a failed statement leaves a SQLite transaction usable.
func (sqliteDialect) guardStatement(_ *txn, stmt func() error) error { return stmt() }

func (d sqliteDialect) commitFailed(_ context.Context, _ *txn, err, _ error) (bool, error) {
	return true, d.err(err)
}

func (sqliteDialect) retryable(error, bool) bool { return false }

func (sqliteDialect) isUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}

// listFilter leaves out the conditions it does not need: on every row of
// a plan they cost more than it seems. (Unused parameters are still
// bound: SQLite numbers parameters up to the highest it sees.)
func (sqliteDialect) listFilter(status, feature bool) string {
	filter := "t.seq > ?4"
	if status {
		filter += " AND t.status = ?1"
	}
	if feature {
		filter += " AND t.feature = ?2"
	}
	return filter
}

// err turns SQLite's busy, corrupt and not-a-database errors into the
// package's errors, naming the file. Other errors pass through.
func (d sqliteDialect) err(err error) error {
	s := d.s
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return s.lockedErr()
	case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
		return fmt.Errorf("%w: %s is corrupt or not a database (%v)", ErrNotADatabase, s.path, err)
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM:
		// SQLite's codes ("disk I/O error (4874)") mean nothing to a user:
		// say what keeps the file from being written, when that is it.
		if why := writeTrouble(filepath.Dir(s.path)); why != "" {
			return temporary{fmt.Errorf("%w: %s: %s", ErrUnwritable, s.path, why)}
		}
		if code := se.Code() & 0xff; code == sqlite3.SQLITE_FULL || code == sqlite3.SQLITE_IOERR {
			return temporary{fmt.Errorf("dag: %s: %w", s.path, err)}
		}
	}
	return fmt.Errorf("dag: %s: %w", s.path, err)
}

// begin takes the write lock and starts an immediate transaction on the
// writer's connection. With o.bulk, the transaction is a bulk load that
// checks every reference itself (see importer): foreign keys are off on
// the writer's connection for it, and its statement journals (the undo
// log of one statement within the transaction, which SQLite keeps for
// every statement that inserts many rows) stay in memory instead of
// going to a temporary file a page at a time. Both are set back after it.
func (d sqliteDialect) begin(ctx context.Context, o txOpts) (t *txn, end func(), err error) {
	s := d.s
	release, err := s.takeWriter(ctx)
	if err != nil {
		return nil, nil, err
	}
	t = &txn{ctx: ctx, w: s.w, now: s.now(), s: s, locked: true}
	// unbulk sets the connection back after the transaction; one that
	// cannot be is closed (the next write opens one as the DSN says).
	unbulk := func() {
		if !o.bulk {
			return
		}
		for _, p := range []string{"foreign_keys = ON", "temp_store = DEFAULT"} {
			if s.w.pragma(context.Background(), p) != nil {
				s.w.close()
				s.w = nil
				return
			}
		}
	}
	if o.bulk {
		// No-ops inside a transaction, or read when one begins.
		for _, p := range []string{"foreign_keys = OFF", "temp_store = MEMORY"} {
			if err := s.w.pragma(ctx, p); err != nil {
				unbulk()
				release(nil)
				return nil, nil, d.err(err)
			}
		}
	}
	if _, err := t.exec("BEGIN IMMEDIATE"); err != nil {
		unbulk()
		release(nil)
		return nil, nil, d.err(err)
	}
	return t, func() {
		if !t.committed {
			// The context may have ended: roll back regardless.
			s.w.exec(context.Background(), "ROLLBACK")
			unbulk()
			release(nil)
			return
		}
		if unbulk(); s.w == nil {
			release(nil)
			return
		}
		s.w.unckpt = true
		if time.Since(s.w.ckptAt) < checkpointEvery {
			release(nil)
			return
		}
		release(s.w.checkpoint)
	}, nil
}

// tuneImport cuts the per-row work SQLite does for every insert to what
// the import needs, for this transaction only. Checks: CHECK (status IN
// (…)) builds its list anew for each row, a third of a bulk insert's
// time; the first pass has made every check the constraints make. A
// larger page cache (16 MB): the indexes of a large plan, written in no
// particular order, outgrow SQLite's 2 MB and went to the log and back
// page by page. (Each page costs about twice its size: the allocator
// rounds a page and its header up.) The count of tasks by status is kept
// by a trigger, run for each row (and making SQLite journal each
// statement): it is dropped for the import, the counts added once at the
// end (restore), and the trigger created again as it was — all in this
// transaction.
func (sqliteDialect) tuneImport(im *importer) (undo func(), restore func() error, err error) {
	t := im.t
	var set []string
	undo = func() {
		for _, p := range set {
			t.w.pragma(context.Background(), p)
		}
	}
	for _, p := range [][2]string{
		{"ignore_check_constraints = ON", "ignore_check_constraints = OFF"},
		{"cache_size = -16384", "cache_size = -2000"},
	} {
		if err := t.w.pragma(t.ctx, p[0]); err != nil {
			undo()
			return nil, nil, err
		}
		set = append(set, p[1])
	}
	if restore, err = im.dropCountTrigger(); err != nil {
		undo()
		return nil, nil, err
	}
	return undo, restore, nil
}

// changeToken implements loop.ChangeWatcher without a query: the size and
// modification time of the database file and of its write-ahead log, one
// of which every commit, by any process, changes.
func (d sqliteDialect) changeToken(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return d.fileState(), nil
}

func (d sqliteDialect) fileState() string {
	state := ""
	for _, p := range []string{d.s.path, d.s.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			state += fmt.Sprintf("%d.%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			state += "-;"
		}
	}
	return state
}

// waitChange looks at the files (two stat calls; the database itself is
// not read) when its store commits, when another process writes them
// (where the platform says so), and every watchEvery, or watchedEvery
// where it does (see changes).
func (d sqliteDialect) waitChange(ctx context.Context, token string, dur time.Duration) (bool, error) {
	deadline := time.NewTimer(dur)
	defer deadline.Stop()
	tick := time.NewTicker(d.s.changes.watchFiles(d.s.path))
	defer tick.Stop()
	for {
		woken := d.s.changes.next()
		if d.fileState() != token {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-tick.C:
		case <-woken:
		}
	}
}

func (d sqliteDialect) close() error {
	d.s.changes.close()
	return d.s.db.Close()
}

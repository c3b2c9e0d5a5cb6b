package dag

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"time"
)

// readRecoverWait bounds how long a read waits to recover expired or
// orphaned claims first (for the write lock, or the writing itself).
const readRecoverWait = 200 * time.Millisecond

// openReadOnly opens the database for reading only, when it cannot be
// written (cause, an ErrUnwritable: a read-only directory, a full disk):
// read commands keep working, and every write returns cause. It first asks
// SQLite for a read-only connection, which uses the shared-memory file of
// the processes that have the database open; without one (SQLite cannot
// make it here), it reads the file as immutable — but only when no
// write-ahead log holds commits the file lacks, which such a read would
// miss.
func openReadOnly(ctx context.Context, abs, path string, opts Options, cause error) (*Store, error) {
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	s := &Store{Now: opts.Now, path: path, busy: busy, readOnly: cause, wlock: &writeLock{sem: make(chan struct{}, 1)}}
	s.d = sqliteDialect{s}
	if s.Now == nil {
		s.Now = time.Now
	}
	try := func(params string) error {
		db, err := sql.Open("sqlite", fileURI(abs)+"?"+params)
		if err != nil {
			return err
		}
		version, err := s.header(db.QueryRowContext(ctx, headerQuery))
		if err == nil && version != SchemaVersion() {
			err = fmt.Errorf("%w: %s has schema version %d; this ralph needs %d and cannot migrate a database it cannot write", cause, path, version, SchemaVersion())
		}
		if err != nil {
			db.Close()
			return err
		}
		s.db = db
		return nil
	}
	err := try("mode=ro&_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")")
	if err == nil {
		return s, nil
	}
	if fi, werr := os.Stat(abs + "-wal"); werr == nil && fi.Size() > 0 {
		return nil, err
	}
	if err := try("mode=ro&immutable=1"); err != nil {
		return nil, err
	}
	return s, nil
}

package dag

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// DefaultPriority is the priority callers give a task when the user named
// none. Lower numbers are claimed first.
const DefaultPriority = 2

// Errors returned by the Store, wrapped with the path, id or input line that
// caused them; check them with errors.Is. The store also returns the errors
// of package loop: loop.ErrNotFound, loop.ErrNotReady, loop.ErrNoReadyTask,
// loop.ErrNotHolder, loop.ErrFeatureNotFound and *loop.TransitionError.
var (
	ErrCycle         = errors.New("dag: dependency would create a cycle")
	ErrDuplicateID   = errors.New("dag: task id already exists")
	ErrLocked        = errors.New("dag: database is locked by another process")
	ErrNotADatabase  = errors.New("dag: not a ralph database") // corrupt / foreign file
	ErrSchemaTooNew  = errors.New("dag: database schema is newer than this ralph")
	ErrFeatureExists = errors.New("dag: feature already exists")
)

// Store is the SQLite task graph. It implements loop.TaskStore,
// loop.FeatureStore and loop.ReceiptStore. A Store is safe for concurrent
// use by many goroutines, and many processes may open the same file at once.
type Store struct {
	// Now is the clock; it defaults to time.Now. Set it (or Options.Now)
	// before the first call, never concurrently with one.
	Now func() time.Time

	db   *sql.DB
	path string
	busy time.Duration
}

// Options tune Open.
type Options struct {
	// BusyTimeout is how long a write waits for another process's write
	// lock before failing with ErrLocked; zero means 5s.
	BusyTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var (
	_ loop.TaskStore    = (*Store)(nil)
	_ loop.FeatureStore = (*Store)(nil)
	_ loop.ReceiptStore = (*Store)(nil)
)

var errTODO = errors.New("dag: not implemented yet")

// Open opens the database at path, creating it (and its directory's file,
// not the directory) if needed, and applies pending schema migrations.
// Errors: ErrNotADatabase (corrupt or foreign file), ErrSchemaTooNew,
// ErrLocked, each naming path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	return nil, errTODO
}

// OpenExisting is Open but fails with an error wrapping fs.ErrNotExist when
// there is no file at path; it never creates one.
func OpenExisting(ctx context.Context, path string, opts Options) (*Store, error) {
	return nil, errTODO
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Path returns the database file's path as given to Open.
func (s *Store) Path() string { return s.path }

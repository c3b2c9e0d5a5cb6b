package dag

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// Server is a database server that keeps a plan (ARCHITECTURE.md §6): package
// dag/postgres implements it for PostgreSQL. A Store opened with
// OpenServer runs the graph rules of this package — the status machine,
// the auto-transitions, the readiness counters, the cycle check, claims,
// leases, recoveries, generations, history — over it unchanged, the way
// River's drivers share one interface and one test suite. The rules'
// queries are written in SQLite's dialect; Rebind turns each into the
// server's once, when it is prepared.
//
// Writes are ordered as on SQLite: every write transaction first takes
// the plan's write lock (LockPlan), so that the rules, which read and then
// write, see no other writer's half-done work; a row a write transaction
// reads to move (a task's state) is locked too (ForUpdate). The one
// exception is the claim of the first ready task, a single statement that
// takes its row with ClaimSkipLocked and no plan lock: claims on many
// machines do not queue behind each other. Recovery takes the plan lock
// first, in a claim's transaction too.
type Server interface {
	// Name names the plan and the server for messages
	// ("plan app on postgres://db.example/ralph").
	Name() string
	// DB is the pool reads run on; its connections see the plan's tables.
	DB() *sql.DB
	// Connector opens the connection the Store's write transactions run
	// on.
	Connector() driver.Connector
	// Rebind turns a query in SQLite's dialect into the server's.
	Rebind(q string) string
	// LockPlan is the statement that makes a write transaction the only
	// writer of the plan until it ends. It returns one row: the
	// transaction's id, as TxID's statement does, so that a write that
	// holds the lock does not ask again before its COMMIT (a round trip
	// less in the time every other writer waits).
	LockPlan() string
	// ForUpdate is the clause that locks the rows a query reads for the
	// rest of the transaction (" FOR UPDATE"); ClaimSkipLocked the one
	// that takes the first row no other transaction holds
	// (" FOR UPDATE SKIP LOCKED").
	ForUpdate() string
	ClaimSkipLocked() string
	// Err turns the server's errors into the package's, naming the plan:
	// lost connections and a server shutting down become Temporary
	// errors; it returns err unchanged when it has nothing to add.
	Err(err error) error
	// Retryable reports whether a transaction that failed with err
	// certainly changed nothing and may run again: the connection was
	// lost or the server shut down (before the commit was sent, when
	// committing says err came from the commit), a deadlock, a
	// serialization failure.
	Retryable(err error, committing bool) bool
	// TxID is the statement that returns the current transaction's id,
	// as text; a write transaction that has not taken the plan's lock
	// (LockPlan says it) asks it just before its COMMIT.
	// Committed tells whether the transaction of that id committed (ok
	// false: the server cannot tell, yet or any more). The Store asks,
	// on another connection, when a COMMIT's answer was lost with its
	// connection: a write whose commit happened is not made twice, and
	// one that rolled back runs again.
	TxID() string
	Committed(ctx context.Context, id string) (committed, ok bool, err error)
	// IsUnique reports whether err is a violation of a unique constraint.
	IsUnique(err error) bool
	// The server tells waiting loops of changes (LISTEN/NOTIFY on
	// PostgreSQL).
	loop.ChangeWatcher
	// ViewChanges tells a viewer (ralph serve) of the same changes and
	// also of each claim, which waiting loops are not told of: a claim
	// notifies only while a viewer is watching.
	ViewChanges() loop.ChangeWatcher
	// Close closes the pool and whatever else the server holds open.
	Close() error
}

// ServerOptions tune OpenServer.
type ServerOptions struct {
	Options
	// RetryFor is how long a write that failed because the server could
	// not be reached (a restart, a dropped connection) is tried again, with
	// backoff, before its error is returned; zero means
	// DefaultServerRetry.
	RetryFor time.Duration
}

// DefaultServerRetry is how long a Store on a server retries a write the
// server could not take, when ServerOptions.RetryFor is zero: long enough
// for a server to restart.
const DefaultServerRetry = time.Minute

// OpenServer returns a Store over srv, whose schema the caller has
// brought up to date. Closing the Store closes srv.
func OpenServer(ctx context.Context, srv Server, opts ServerOptions) (*Store, error) {
	if srv == nil {
		return nil, errors.New("dag: no server")
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	retry := opts.RetryFor
	if retry <= 0 {
		retry = DefaultServerRetry
	}
	s := &Store{Now: opts.Now, db: srv.DB(), path: srv.Name(), busy: busy, srv: srv, retryFor: retry,
		connector: srv.Connector(), wlock: newWriteLock("")}
	if s.Now == nil {
		s.Now = time.Now
	}
	if opts.ReadOnly {
		s.readOnly = fmt.Errorf("%w: %s; writes are refused", ErrReadOnly, srv.Name())
	}
	if err := ctx.Err(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Server returns the server the Store keeps its plan on, nil for a
// SQLite file.
func (s *Store) Server() Server { return s.srv }

// serverBackoff is the first wait before a write the server could not
// take runs again; each wait doubles, up to serverBackoffMax.
const (
	serverBackoff    = 50 * time.Millisecond
	serverBackoffMax = 2 * time.Second
)

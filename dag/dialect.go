package dag

import (
	"context"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// dialect is what the graph rules ask of the database they run on: the
// store's driver, in River's shape (riverdriver). A Store holds one from
// the moment it is made, sqliteDialect for a file (this package) or
// serverDialect over a Server (package dag/postgres implements that), and
// no code path of the rules asks which one it holds.
//
// The rules' queries are written once, in SQLite's dialect, and the
// driver's rebind turns each into its own when it is prepared (see the
// package doc, "Drivers and dialects"); the few places where the
// databases differ beyond that — the transaction's locking, the clauses
// that lock rows, a recursive query, the listing's columns, the import's
// tuning, change notification, what an error means — are methods here.
type dialect interface {
	// rebind turns a query of the rules into the database's dialect.
	rebind(q string) string
	// err turns the database's errors into the package's, naming the
	// plan; nil stays nil.
	err(err error) error

	// readTx reports whether a read's statements run in one read
	// transaction, which gives them one snapshot on SQLite; a server
	// says (Server.ReadTx).
	readTx() bool

	// begin takes the store's write lock and starts a write transaction
	// as o says; end rolls it back if it was not committed and releases
	// the lock.
	begin(ctx context.Context, o txOpts) (t *txn, end func(), err error)
	// lock makes a write transaction the plan's only writer, once (see
	// Server.LockPlan); a transaction that holds the database from its
	// BEGIN is made with txn.locked set and never asks.
	lock(t *txn) error
	// forUpdate is the clause that locks the rows a write transaction's
	// query reads, skipLocked the one with which a claim takes the first
	// row no other transaction holds; "" where the writer holds the whole
	// database.
	forUpdate() string
	skipLocked() string
	// txID is the expression of the write transaction's id that a
	// claim's statement returns, so that beforeCommit need not ask (see
	// Server.TxID); "" where there is none to ask.
	txID() string
	// beforeCommit runs just before a write transaction's COMMIT (on a
	// server: ask the transaction's id, for commitFailed); committed
	// just after a COMMIT that succeeded (on a file: wake this store's
	// waits, see changes).
	beforeCommit(t *txn) error
	committed()
	// commitFailed is what a write transaction returns when its COMMIT
	// failed with err (ctx still live); ok is what it returns committed.
	// committing says the outcome is unknown (see Store.retrying).
	commitFailed(ctx context.Context, t *txn, err, ok error) (committing bool, rerr error)
	// retryable reports whether a read or a write transaction that failed
	// with err certainly changed nothing and may succeed if run again (a
	// server that restarted; committing: err came from the COMMIT); never
	// on SQLite, whose busy handler does the waiting. (Store.retrying
	// runs the tries: a closure handed to an interface method escapes,
	// and every read and write would allocate it.)
	retryable(err error, committing bool) bool

	// isUnique reports whether err is a violation of a unique constraint.
	isUnique(err error) bool
	// reachesQuery is txn.reaches's recursive query.
	reachesQuery() string
	// listFilter is the WHERE clause of a listing of tasks after ?4, of
	// status ?1 if status, of feature ?2 if feature; listBlockers the
	// columns a listing's row adds for the task's blockers, "" when they
	// come from a second cursor (see listTasks).
	listFilter(status, feature bool) string
	listBlockers() string
	// tuneImport sets up a write transaction for a bulk import's inserts
	// (see importer.write): restore, called on success, puts back what
	// the import must leave as it was in the transaction; undo, called
	// always, sets the connection back.
	tuneImport(im *importer) (undo func(), restore func() error, err error)
	// guardStatement runs stmt, a statement of a write transaction whose
	// failure the transaction must survive (the import's look-up of a
	// duplicate id after a failed insert).
	guardStatement(t *txn, stmt func() error) error
	// featureFiles is nil when the plan keeps feature files, else
	// ErrNoFeatureFiles.
	featureFiles() error

	// The changes of the plan (loop.ChangeWatcher), and what a viewer
	// watches (Store.ViewChanges).
	changeToken(ctx context.Context) (string, error)
	waitChange(ctx context.Context, token string, d time.Duration) (bool, error)
	viewChanges() loop.ChangeWatcher

	// server is the Server of the plan, nil for a file.
	server() Server
	// close closes the database (the pool and what else the driver
	// holds open), after the writer's connection.
	close() error
}

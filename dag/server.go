package dag

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
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
// reads to move (a task's state) is locked too (ForUpdate). The
// exceptions: the claim of the first ready task, a single statement that
// takes its row with ClaimSkipLocked and no plan lock, and the completion
// of a claim by its holder, under the lock's shared form
// (LockPlanShared), beside other completions, locking each row it reads
// to move: claims and completions on many machines do not queue behind
// each other. Recovery takes the whole plan lock first, in a claim's or a
// completion's transaction too.
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
	// LockPlanShared is LockPlan's statement for the lock's shared form,
	// which the completions of claims take (see Store.Complete): they run
	// beside each other, and no other write runs beside them.
	LockPlanShared() string
	// ReadTx reports whether a read's statements should share one
	// transaction. At READ COMMITTED each statement of a transaction sees
	// its own snapshot anyway, so directly connected they need not (BEGIN
	// and ROLLBACK are two round trips); behind a pooler in transaction
	// pooling each statement outside one pays a BEGIN and COMMIT of its
	// own.
	ReadTx() bool
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
	// TxID is the expression whose value is the current transaction's
	// id, as text; a write transaction that has not taken the plan's lock
	// (LockPlan says it) asks it just before its COMMIT, unless a claim's
	// statement returned it.
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
	// PostgreSQL). A first wait may end at once, a change maybe unheard:
	// a server tells of changes only while a loop waits.
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
	// OnTrouble, when set, is told when the server stops answering — a
	// read or write failed for a reason a retry may cure: the server
	// unreachable, restarting, a connection lost — and again when a call
	// succeeds after that, so that a person watching hears of an outage
	// while it lasts and of its end, rather than a silent stall. It is
	// called once per change, from the goroutine of the call that saw it,
	// and must not block.
	OnTrouble func(ServerTrouble)
}

// ServerTrouble is a change of the server's state, as OnTrouble hears of
// it.
type ServerTrouble struct {
	// Down: the server stopped answering; false: it answers again.
	Down bool
	// Since is when the first call failed.
	Since time.Time
	// Err is that call's error (Down only).
	Err error
}

// trouble tracks whether the server answers, for ServerOptions.OnTrouble.
type trouble struct {
	notify func(ServerTrouble)
	mu     sync.Mutex
	since  time.Time // zero: the server answers
}

// failed notes that a call failed with err, which a retry may cure.
func (tr *trouble) failed(err error) {
	if tr == nil || tr.notify == nil {
		return
	}
	tr.mu.Lock()
	first := tr.since.IsZero()
	if first {
		tr.since = time.Now()
	}
	since := tr.since
	tr.mu.Unlock()
	if first {
		tr.notify(ServerTrouble{Down: true, Since: since, Err: err})
	}
}

// answered notes that a call got the server's answer.
func (tr *trouble) answered() {
	if tr == nil || tr.notify == nil {
		return
	}
	tr.mu.Lock()
	since := tr.since
	tr.since = time.Time{}
	tr.mu.Unlock()
	if !since.IsZero() {
		tr.notify(ServerTrouble{Since: since})
	}
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
	s := &Store{Now: opts.Now, db: srv.DB(), path: srv.Name(), busy: busy,
		connector: srv.Connector(), wlock: newWriteLock("")}
	s.d = serverDialect{s: s, srv: srv, retryFor: retry}
	s.retryFor = retry
	s.trouble = &trouble{notify: opts.OnTrouble}
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
func (s *Store) Server() Server { return s.d.server() }

// serverBackoff is the first wait before a write the server could not
// take runs again; each wait doubles, up to serverBackoffMax.
const (
	serverBackoff    = 50 * time.Millisecond
	serverBackoffMax = 2 * time.Second
)

// serverDialect is the driver of a plan on a Server: the rules' generic
// part of every server (the plan's lock, retries with backoff, the
// outcome of a lost COMMIT), over the statements, dialect and error
// mapping the Server supplies (package dag/postgres).
type serverDialect struct {
	s   *Store
	srv Server
	// retryFor is how long a write the server could not take is retried.
	retryFor time.Duration
}

var _ dialect = serverDialect{}

func (d serverDialect) rebind(q string) string  { return d.srv.Rebind(q) }
func (d serverDialect) forUpdate() string       { return d.srv.ForUpdate() }
func (d serverDialect) skipLocked() string      { return d.srv.ClaimSkipLocked() }
func (d serverDialect) isUnique(err error) bool { return d.srv.IsUnique(err) }
func (d serverDialect) featureFiles() error     { return nil }
func (d serverDialect) server() Server          { return d.srv }
func (d serverDialect) readTx() bool            { return d.srv.ReadTx() }
func (d serverDialect) txID() string            { return d.srv.TxID() }
func (d serverDialect) close() error            { return d.srv.Close() }

func (d serverDialect) err(err error) error {
	if err == nil {
		return nil
	}
	return d.srv.Err(err)
}

// lock takes the plan's write lock, its shared form when t.shared,
// whose statement returns the transaction's id too (see Server).
func (d serverDialect) lock(t *txn) error {
	q := d.srv.LockPlan()
	if t.shared {
		q = d.srv.LockPlanShared()
	}
	if err := t.row(q).Scan(&t.xid); err != nil {
		return err
	}
	t.locked = true
	// The transaction's time is taken under the lock, as on SQLite: a
	// transaction that waited for it must not stamp its history earlier
	// than the one it waited for.
	t.now = t.s.now()
	return nil
}

// committed wakes this store's waits (see waitChange).
func (d serverDialect) committed() { d.s.changes.wake() }

// beforeCommit asks the id of the write transaction about to commit
// (see commitFailed), unless the plan's lock said it.
func (d serverDialect) beforeCommit(t *txn) error {
	if t.xid != "" {
		return nil
	}
	return t.row(`SELECT ` + d.srv.TxID()).Scan(&t.xid)
}

// begin starts a write transaction on a server's connection, holding the
// plan's write lock unless o.unlocked, in its shared form if o.shared (see
// Server). A connection that
// fails is closed; the next transaction opens another.
func (d serverDialect) begin(ctx context.Context, o txOpts) (t *txn, end func(), err error) {
	s := d.s
	release, err := s.takeWriter(ctx)
	if err != nil {
		return nil, nil, err
	}
	t = &txn{ctx: ctx, w: s.w, now: s.now(), s: s}
	drop := func() {
		s.w.close()
		s.w = nil
		release(nil)
	}
	// BEGIN goes with the transaction's first statement (wconn.later).
	if err := s.w.later(ctx, "BEGIN"); err != nil {
		drop()
		return nil, nil, d.err(err)
	}
	if !o.unlocked {
		t.shared = o.shared
		if err := d.lock(t); err != nil {
			s.w.exec(context.Background(), "ROLLBACK")
			drop()
			return nil, nil, d.err(err)
		}
	}
	return t, func() {
		if t.committed {
			release(nil)
			return
		}
		s.w.discard()
		if _, err := s.w.exec(context.Background(), "ROLLBACK"); err != nil {
			drop()
			return
		}
		release(nil)
	}, nil
}

// retryable: Server.Retryable.
func (d serverDialect) retryable(err error, committing bool) bool {
	return d.srv.Retryable(err, committing)
}

// commitFailed: a COMMIT whose answer was lost with the connection (or
// came after the commit, with the news that the server is shutting
// down) may have committed: the server is asked (Server.Committed).
// Committed, the write returns ok, as if the answer had come; rolled
// back, it may run again; when the server cannot tell, err comes back as
// it is, committing.
func (d serverDialect) commitFailed(ctx context.Context, t *txn, err, ok error) (bool, error) {
	if t.xid == "" || d.srv.Retryable(err, true) {
		return true, d.err(err)
	}
	deadline := time.Now().Add(d.retryFor)
	wait := serverBackoff
	for {
		committed, known, qerr := d.srv.Committed(ctx, t.xid)
		switch {
		case qerr == nil && known && committed:
			return false, ok
		case qerr == nil && known:
			return false, d.err(err)
		case ctx.Err() != nil || time.Now().Add(wait).After(deadline):
			return true, d.err(err)
		}
		if serr := sleepCtx(ctx, wait); serr != nil {
			return true, serr
		}
		wait = min(2*wait, serverBackoffMax)
	}
}

// reachesQuery: PostgreSQL allows a recursive query one recursive term
// (see reachesQueryServer).
func (serverDialect) reachesQuery() string { return reachesQueryServer }

// listFilter binds every parameter in a condition: a server wants a type
// for every parameter it is given.
func (serverDialect) listFilter(_, _ bool) string {
	return "t.seq > ?4 AND (?1 = '' OR t.status = ?1) AND (?2 = '' OR t.feature = ?2)"
}

// listBlockers: a server's connection runs one query at a time, so the
// blockers come in the task's row, as a JSON array.
func (serverDialect) listBlockers() string {
	return `, CASE WHEN blocker_count > 0 THEN
			(SELECT json_agg(d.blocker_id ORDER BY d.seq) FROM deps d WHERE d.blocked_id = t.id) END`
}

// tuneImport: a server's count trigger counts as rows come, and it has
// no pragmas: nothing to tune.
func (serverDialect) tuneImport(*importer) (undo func(), restore func() error, err error) {
	return func() {}, func() error { return nil }, nil
}

// guardStatement: on a server a failed statement ends the transaction's
// use: a savepoint keeps it.
func (serverDialect) guardStatement(t *txn, stmt func() error) error {
	if _, err := t.exec("SAVEPOINT guarded"); err != nil {
		return err
	}
	err := stmt()
	if err != nil {
		if _, rerr := t.exec("ROLLBACK TO SAVEPOINT guarded"); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	return err
}

func (d serverDialect) changeToken(ctx context.Context) (string, error) {
	return d.srv.ChangeToken(ctx)
}

// waitChange waits for the server's word, or for a commit of this store
// (the workers of one build hear each other at once, where the server's
// word may be a poll away: behind a pooler).
func (d serverDialect) waitChange(ctx context.Context, token string, dur time.Duration) (bool, error) {
	woken := d.s.changes.next()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-woken:
			cancel()
		case <-wctx.Done():
		}
	}()
	changed, err := d.srv.WaitChange(wctx, token, dur)
	if ctx.Err() == nil && wctx.Err() != nil {
		return true, nil // woken by this store's commit
	}
	return changed, err
}

func (d serverDialect) viewChanges() loop.ChangeWatcher { return d.srv.ViewChanges() }

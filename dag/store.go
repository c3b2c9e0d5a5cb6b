package dag

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"

	"github.com/ralph-dev/ralph/loop"
)

// DefaultPriority is the priority callers give a task when the user named
// none. Lower numbers are claimed first.
const DefaultPriority = 2

// DefaultBusyTimeout is how long a write waits for another process's write
// lock when Options.BusyTimeout is zero.
const DefaultBusyTimeout = 5 * time.Second

// Errors returned by the Store, wrapped with the path, id or input line that
// caused them; check them with errors.Is. The store also returns the errors
// of package loop: loop.ErrNotFound, loop.ErrNotReady, loop.ErrNoReadyTask,
// loop.ErrNotHolder, loop.ErrFeatureNotFound and *loop.TransitionError.
var (
	ErrCycle       = errors.New("dag: dependency would create a cycle")
	ErrDuplicateID = errors.New("dag: task id already exists")
	ErrLocked      = errors.New("dag: database is locked by another process")
	// ErrNoAnswer: on a database server, a write waited too long for the
	// server to answer the write before it (a partition, an overloaded
	// server): not a lock another process holds.
	ErrNoAnswer      = errors.New("dag: the database server does not answer")
	ErrNotADatabase  = errors.New("dag: not a ralph database") // corrupt / foreign file
	ErrSchemaTooNew  = errors.New("dag: database schema is newer than this ralph")
	ErrFeatureExists = errors.New("dag: feature already exists")
	// ErrUnwritable: the database cannot be written: its directory is
	// read-only, or the disk is full. The message says which. A store that
	// could only be opened read-only returns it from every write.
	ErrUnwritable = errors.New("dag: the database cannot be written")
	// ErrReadOnly: the store was opened with Options.ReadOnly; it
	// refuses every write.
	ErrReadOnly = errors.New("dag: the plan was opened read-only")
	// ErrNoDependency: RemoveDependency named a dependency that does not exist.
	ErrNoDependency = errors.New("dag: no such dependency")
)

// applicationID marks a ralph database in the SQLite header
// (PRAGMA application_id): "RALP".
const applicationID = 0x52414c50

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationFS holds the migrations; tests swap in a longer list.
var migrationFS fs.FS = embeddedMigrations

// migrations returns the embedded schema migrations in order; migration i
// (0-based) brings the schema from version i to version i+1.
func migrations() ([]string, error) {
	return ReadMigrations(migrationFS, "migrations")
}

// ReadMigrations returns the scripts dir/NNNN_name.sql of fsys in order,
// checking that they are numbered 0001, 0002, … without a gap: script i
// (0-based) brings a schema from version i to i+1. The PostgreSQL store
// keeps its own list the same way.
func ReadMigrations(fsys fs.FS, dir string) ([]string, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for i, name := range names {
		n, err := strconv.Atoi(strings.SplitN(path.Base(name), "_", 2)[0])
		if err != nil || n != i+1 {
			return nil, fmt.Errorf("dag: migration %s is out of sequence (want %04d_…)", name, i+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	return out, nil
}

// SchemaVersion is the schema version this build of ralph writes.
func SchemaVersion() int {
	m, _ := migrations()
	return len(m)
}

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

	// stmts caches prepared statements by query text: parsing SQL costs
	// more than running these small queries. database/sql prepares each
	// once per connection.
	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt

	// create: the store may initialise an empty database (Open, not
	// OpenExisting).
	create bool
	// readOnly, when set, is why the store could only be opened for
	// reading (an ErrUnwritable): every write returns it.
	readOnly error

	// holders caches the holder processes found alive.
	holderMu sync.Mutex
	holders  holderCache

	wlock *writeLock
	// changes wakes the store's waits at its own commits, and on a
	// SQLite file at other processes' writes (see changes).
	changes changes
	// w is the connection of write transactions, used under wlock only.
	// It is opened by the first write (begin), so that a process that
	// only reads — `ralph task peek`, list, plan-status — opens one
	// connection, not two.
	w         *wconn
	connector driver.Connector

	// d is the driver of the database the plan lives in: sqliteDialect
	// for a file, serverDialect for a Server (OpenServer).
	d dialect
	// retryFor is how long a read or write the database could not take
	// is retried (dialect.retryable); zero on SQLite.
	retryFor time.Duration
	// trouble hears of a server that stops answering and answers again
	// (ServerOptions.OnTrouble); nil on SQLite.
	trouble *trouble
}

// Options tune Open.
type Options struct {
	// BusyTimeout is how long a write waits for another process's write
	// lock before failing with ErrLocked; zero means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ReadOnly opens the plan for reading only: nothing is migrated or
	// created, reads do not recover expired or orphaned claims, and every
	// write returns an error wrapping ErrReadOnly. A schema version other
	// than this ralph's is an error. For viewers (ralph serve) that must
	// change nothing.
	ReadOnly bool
}

var (
	_ loop.TaskStore    = (*Store)(nil)
	_ loop.FeatureStore = (*Store)(nil)
	_ loop.ReceiptStore = (*Store)(nil)
)

// Open opens the database at path, creating the file if needed (not its
// directory), and applies pending schema migrations.
// Errors: ErrNotADatabase (corrupt or foreign file), ErrSchemaTooNew,
// ErrLocked, each naming path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	return open(ctx, path, opts, true)
}

// OpenExisting is Open but fails with an error wrapping fs.ErrNotExist when
// there is no file at path; it never creates one.
func OpenExisting(ctx context.Context, path string, opts Options) (*Store, error) {
	return open(ctx, path, opts, false)
}

func open(ctx context.Context, path string, opts Options, create bool) (*Store, error) {
	if path == "" {
		return nil, errors.New("dag: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("dag: %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("%w: %s is a directory", ErrNotADatabase, path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("dag: %w", err)
	case err != nil && !create:
		return nil, fmt.Errorf("dag: no database at %s: %w", path, fs.ErrNotExist)
	case err == nil && !create && fi.Size() == 0:
		// An empty file is not a new plan: only init makes one.
		return nil, fmt.Errorf("%w: %s is empty (0 bytes); 'ralph init' creates the database", ErrNotADatabase, path)
	}
	if opts.ReadOnly {
		if err != nil {
			return nil, fmt.Errorf("dag: no database at %s: %w", path, fs.ErrNotExist)
		}
		return openReadOnly(ctx, abs, path, opts, fmt.Errorf("%w: %s; writes are refused", ErrReadOnly, path))
	}
	s, err := openRW(ctx, abs, path, opts, create)
	if err != nil && !create && errors.Is(err, ErrUnwritable) {
		// A read-only directory, a full disk: reads can still work.
		if ro, rerr := openReadOnly(ctx, abs, path, opts, err); rerr == nil {
			return ro, nil
		}
	}
	return s, err
}

// openRW opens the database for reading and writing and migrates it.
func openRW(ctx context.Context, abs, path string, opts Options, create bool) (*Store, error) {
	fi, err := os.Stat(abs)
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	mode := "rwc"
	if !create {
		mode = "rw"
	}
	s := &Store{Now: opts.Now, db: nil, path: path, busy: busy, create: create}
	s.d = sqliteDialect{s}
	if s.Now == nil {
		s.Now = time.Now
	}
	// Look at an existing file before the WAL pragma touches it: a foreign
	// or corrupt file must be left exactly as it was.
	if err == nil && fi.Size() > 0 {
		if err := s.precheck(ctx, abs); err != nil {
			return nil, err
		}
	}
	// busy_timeout comes first so that switching to WAL waits too.
	// synchronous(NORMAL) is the usual WAL setting: a commit is durable
	// against a crash of the process, and fsyncs happen at checkpoints.
	q := "mode=" + mode +
		"&_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")" +
		"&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)" +
		"&_txlock=immediate"
	dsn := fileURI(abs) + "?" + q
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("dag: %s: %w", path, err)
	}
	s.db = db
	s.connector, err = sqlite.NewConnector(dsn + "&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("dag: %s: %w", path, err)
	}
	s.wlock = newWriteLock(abs)
	if err := s.migrate(ctx); err != nil {
		s.closeWriter()
		s.wlock.close()
		db.Close()
		return nil, err
	}
	return s, nil
}

func fileURI(abs string) string {
	return "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath()
}

// precheck refuses foreign, corrupt and too new files before anything
// writes to them. The 100-byte file header usually decides (and costs no
// SQLite connection); a file without our application id, or one whose
// header page may still live in the WAL, gets the full inspection. The
// header read here can lag the WAL; migrate checks again over the real
// connection.
func (s *Store) precheck(ctx context.Context, abs string) error {
	f, err := os.Open(abs)
	if err != nil {
		return fmt.Errorf("dag: %w", err)
	}
	var h [100]byte
	n, err := io.ReadFull(f, h[:])
	f.Close()
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("dag: %s: %w", s.path, err)
	}
	if n < len(h) || string(h[:16]) != "SQLite format 3\x00" {
		return fmt.Errorf("%w: %s is not a SQLite database", ErrNotADatabase, s.path)
	}
	version := int(int32(binary.BigEndian.Uint32(h[60:])))
	appID := int(int32(binary.BigEndian.Uint32(h[68:])))
	if appID == applicationID && version >= 0 && version <= SchemaVersion() {
		return nil
	}
	if appID != 0 || version > SchemaVersion() {
		return s.checkHeader(version, appID, 1)
	}
	return s.inspect(ctx, abs)
}

// inspect reads the header fields of an existing file over a connection
// that changes nothing, and refuses foreign, corrupt and too new files.
func (s *Store) inspect(ctx context.Context, abs string) error {
	db, err := sql.Open("sqlite", fileURI(abs)+"?mode=rw&_pragma=busy_timeout("+
		strconv.FormatInt(s.busy.Milliseconds(), 10)+")")
	if err != nil {
		return fmt.Errorf("dag: %s: %w", s.path, err)
	}
	defer db.Close()
	_, err = s.header(db.QueryRowContext(ctx, headerQuery))
	return err
}

// checkHeader decides from the schema version, the application id and the
// number of schema objects whether a file is a ralph database we can use.
func (s *Store) checkHeader(version, appID, tables int) error {
	switch {
	case appID != 0 && appID != applicationID:
		return fmt.Errorf("%w: %s has application_id %#x, not ralph's (another application's file, or a corrupt one)", ErrNotADatabase, s.path, appID)
	case version > SchemaVersion():
		return s.tooNew(version, SchemaVersion())
	case appID == 0 && tables > 0:
		return fmt.Errorf("%w: %s is a SQLite database of another application", ErrNotADatabase, s.path)
	case appID == 0 && version == 0 && !s.create:
		// An empty SQLite file is not a plan until init makes it one.
		return fmt.Errorf("%w: %s has no ralph schema; 'ralph init' creates the database", ErrNotADatabase, s.path)
	}
	return nil
}

// migrate checks that the file is a ralph database (or empty) and brings its
// schema up to date, in one immediate transaction so that processes opening
// a new database at once apply each migration exactly once.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	version, err := s.firstHeader(ctx)
	if err != nil || version == len(ms) {
		return err
	}
	t, end, err := s.begin(ctx, txOpts{})
	if err != nil {
		return err
	}
	defer end()
	// Read again under the write lock: another process may have migrated.
	if version, err = s.header(t.row(headerQuery)); err != nil || version == len(ms) {
		return err
	}
	for v := version; v < len(ms); v++ {
		// Not through the statement cache: a migration is a script run
		// once.
		if _, err := t.s.w.c.(driver.ExecerContext).ExecContext(ctx, ms[v], nil); err != nil {
			return fmt.Errorf("dag: %s: migration to schema version %d: %w", s.path, v+1, s.dbErr(err))
		}
	}
	// PRAGMAs take no parameters; both values are integers of ours.
	if _, err := t.s.w.c.(driver.ExecerContext).ExecContext(ctx,
		fmt.Sprintf("PRAGMA user_version = %d; PRAGMA application_id = %d", len(ms), applicationID), nil); err != nil {
		return s.dbErr(err)
	}
	return s.dbErr(t.commit())
}

// firstHeader is the first read of a file, which processes opening one
// new file at once may make while another switches it to WAL: SQLite then
// answers SQLITE_BUSY at once, without waiting in its busy handler (seen
// in about 1 of 60 runs of TestConcurrentOpenOfNewFile). It is tried again
// until the busy timeout.
func (s *Store) firstHeader(ctx context.Context) (int, error) {
	deadline := time.Now().Add(s.busy)
	for {
		version, err := s.header(s.db.QueryRowContext(ctx, headerQuery))
		if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			return version, err
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

const headerQuery = `SELECT (SELECT user_version FROM pragma_user_version),
	(SELECT application_id FROM pragma_application_id), (SELECT count(*) FROM sqlite_schema)`

// header scans the result of headerQuery, checks the file with checkHeader
// and returns the schema version.
func (s *Store) header(row scanner) (int, error) {
	var version, appID, tables int
	err := row.Scan(&version, &appID, &tables)
	if err != nil {
		return 0, s.dbErr(err)
	}
	if err := s.checkHeader(version, appID, tables); err != nil {
		return 0, err
	}
	if version == SchemaVersion() && appID != applicationID {
		return 0, fmt.Errorf("%w: %s has no ralph application id", ErrNotADatabase, s.path)
	}
	return version, nil
}

func (s *Store) tooNew(have, want int) error {
	return fmt.Errorf("%w: %s has schema version %d, this ralph knows up to %d; upgrade ralph", ErrSchemaTooNew, s.path, have, want)
}

// Close closes the database.
func (s *Store) Close() error {
	s.stmtMu.Lock()
	for _, st := range s.stmts {
		st.Close()
	}
	s.stmts = nil
	s.stmtMu.Unlock()
	// Wait for a write in progress in this process.
	s.wlock.sem <- struct{}{}
	werr := s.closeWriter()
	<-s.wlock.sem
	s.wlock.close()
	err := s.d.close()
	if werr != nil {
		return werr
	}
	return err
}

// closeWriter checkpoints what this store wrote and closes the writer's
// connection, if the store ever wrote. Call it holding the write lock's
// semaphore (or before anyone else can use the store).
func (s *Store) closeWriter() error {
	if s.w == nil {
		return nil
	}
	if s.w.unckpt {
		s.w.checkpoint()
	}
	err := s.w.close()
	s.w = nil
	return err
}

// stmt returns the cached prepared statement for q.
func (s *Store) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if st, ok := s.stmts[q]; ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, s.d.rebind(q))
	if err != nil {
		return nil, err
	}
	if s.stmts == nil {
		s.stmts = map[string]*sql.Stmt{}
	}
	s.stmts[q] = st
	return st, nil
}

// Path returns the database file's path as given to Open; for a Store on
// a server, the server's Name.
func (s *Store) Path() string { return s.path }

// dbErr turns the database's errors into the package's, naming the plan
// (dialect.err).
func (s *Store) dbErr(err error) error { return s.d.err(err) }

func (s *Store) now() int64 { return s.Now().UnixNano() }

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// txn is one transaction: a read of the pool (in the read transaction
// tx, or statement by statement when tx is nil: see Store.read), or a
// write transaction on the writer's connection (w).
type txn struct {
	ctx context.Context
	tx  *sql.Tx
	w   *wconn
	now int64
	s   *Store
	// committed: the write transaction need not be rolled back.
	committed bool
	// recovered: expired and orphaned claims have been recovered in this
	// transaction; orphansDone: orphaned ones at least.
	recovered, orphansDone bool
	// actor is who makes the transaction's moves, for the history.
	actor string
	// locked: the write transaction holds the plan's write lock
	// (Server.LockPlan). A SQLite write transaction does from its BEGIN.
	locked bool
	// shared: on a server, the lock it holds is the shared form
	// (txOpts.shared).
	shared bool
	// xid: on a server, the transaction's id, asked before its COMMIT
	// or returned by the plan's lock.
	xid string
}

// lock takes the plan's write lock, once per write transaction (see
// dialect.lock); SQLite's write transactions hold their lock from BEGIN
// IMMEDIATE. A transaction that holds its shared form cannot have it
// whole: errWholeLock makes it run again with the whole lock.
func (t *txn) lock() error {
	if t.shared {
		return errWholeLock
	}
	if t.locked || t.w == nil {
		return nil
	}
	return t.s.d.lock(t)
}

// skipLocked is the clause with which a claim takes the first ready row
// no other transaction holds (dialect.skipLocked).
func (t *txn) skipLocked() string {
	if t.w == nil {
		return ""
	}
	return t.s.d.skipLocked()
}

// forUpdate is the clause that locks the rows a query of a write
// transaction reads (dialect.forUpdate).
func (t *txn) forUpdate() string {
	if t.w == nil {
		return ""
	}
	return t.s.d.forUpdate()
}

// prep returns q prepared for this read, from the store's cache.
func (t *txn) prep(q string) (*sql.Stmt, error) {
	st, err := t.s.stmt(t.ctx, q)
	if err != nil || t.tx == nil {
		return st, err
	}
	return t.tx.StmtContext(t.ctx, st), nil
}

// errReadWrites is the error of a write statement in a read: a read
// without a transaction would commit it.
var errReadWrites = errors.New("dag: a write statement in a read")

func (t *txn) exec(q string, args ...any) (sql.Result, error) {
	if t.w != nil {
		return t.w.exec(t.ctx, q, args...)
	}
	if t.tx == nil {
		return nil, errReadWrites
	}
	st, err := t.prep(q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

// later runs q, a statement whose answer is only whether it failed: on a
// server's writer connection with the next statement (wconn.later).
func (t *txn) later(q string, args ...any) error {
	if t.w != nil {
		return t.w.later(t.ctx, q, args...)
	}
	_, err := t.exec(q, args...)
	return err
}

func (t *txn) query(q string, args ...any) (rowSet, error) {
	if t.w != nil {
		return t.w.query(t.ctx, q, args...)
	}
	st, err := t.prep(q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

func (t *txn) row(q string, args ...any) scanner {
	if t.w != nil {
		rows, err := t.w.query(t.ctx, q, args...)
		return wrow{rows: rows, err: err}
	}
	st, err := t.prep(q)
	if err != nil {
		// A *sql.Row cannot be built with an error; let the pool report
		// it.
		return wrow{err: err}
	}
	return st.QueryRowContext(t.ctx, args...)
}

// begin takes the write lock and starts a write transaction as o says
// (dialect.begin); end rolls it back if it was not committed and
// releases the lock.
func (s *Store) begin(ctx context.Context, o txOpts) (t *txn, end func(), err error) {
	if s.readOnly != nil {
		return nil, nil, s.readOnly
	}
	return s.d.begin(ctx, o)
}

// takeWriter takes the process's write lock and opens the writer
// connection under it: the start of every write transaction, whatever
// the dialect. release gives the lock back.
func (s *Store) takeWriter(ctx context.Context) (release func(between func()), err error) {
	release, err = s.wlock.acquire(ctx, s.busy, s.lockedErr)
	if err != nil {
		return nil, err
	}
	if err := s.openWriter(ctx); err != nil {
		release(nil)
		return nil, err
	}
	return release, nil
}

// openWriter opens the writer's connection if it is not open: the first
// write opens it (see Store.w).
func (s *Store) openWriter(ctx context.Context) error {
	if s.w != nil {
		return nil
	}
	c, err := s.connector.Connect(ctx)
	if err != nil {
		return s.dbErr(err)
	}
	s.w = &wconn{c: c, stmts: map[string]*wstmt{}, ckptAt: time.Now(), d: s.d}
	return nil
}

// checkpointEvery is how often a store that writes checkpoints the WAL.
//
// SQLite's automatic checkpoint runs inside the COMMIT that crosses its
// threshold, so the committing process did it while holding the write lock
// every other process waited for: a tenth of the time a claim held it went
// to copying pages and to the two fsyncs. The writer's connection turns it
// off (wal_autocheckpoint=0) and checkpoints (PASSIVE: it waits for
// nobody) after giving the lock back, at most this often, and on Close.
const checkpointEvery = 50 * time.Millisecond

// checkpoint copies the WAL into the database file as far as readers
// allow. It runs under the store's own write semaphore (the connection is
// not safe for concurrent use), but not under the lock between processes,
// and its errors are of no consequence to the write that preceded it: the
// next checkpoint, or the last connection's close, does the work.
func (w *wconn) checkpoint() {
	w.ckptAt = time.Now()
	w.unckpt = false
	if rows, err := w.query(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)"); err == nil {
		for rows.Next() {
		}
		rows.Close()
	}
}

// commit commits a write transaction.
func (t *txn) commit() error {
	if _, err := t.exec("COMMIT"); err != nil {
		return err
	}
	t.committed = true
	return nil
}

// lockedErr is the error of a write that waited s.busy for the write
// lock. On a server the lock it waited for is this process's own (the
// plan's lock between machines is the server's, waited for in the
// transaction): the write before it has had no answer from the server.
func (s *Store) lockedErr() error {
	if s.d.server() != nil {
		return temporary{fmt.Errorf("%w: %s: a write waited %s behind this process's previous one, which the server has not answered (the server is unreachable, cut off by the network, or overloaded)",
			ErrNoAnswer, s.path, s.busy)}
	}
	return temporary{fmt.Errorf("%w (%s; gave up after waiting %s)", ErrLocked, s.path, s.busy)}
}

// temporary marks an error that may pass if the call is made again (a
// locked database, a full disk, an I/O error): the loop retries the
// outcome of finished work on those (loop.TaskStore).
type temporary struct{ error }

func (temporary) Temporary() bool { return true }
func (e temporary) Unwrap() error { return e.error }

// write runs fn in one write transaction, after returning expired claims
// to pending. On any error nothing is changed (but for a *keptError: see
// checkMove).
func (s *Store) write(ctx context.Context, fn func(t *txn) error) error {
	return s.writeTx(ctx, txOpts{}, fn)
}

// writeAs is write for moves made by actor, whom the history names.
func (s *Store) writeAs(ctx context.Context, actor string, fn func(t *txn) error) error {
	return s.writeTx(ctx, txOpts{actor: actor}, fn)
}

// writeGuarded is writeAs for fn that recovers expired claims itself,
// before anything else it does (txOpts.leasesLater): it calls
// t.ensureRecovered, or makes its first statement change nothing unless
// t.leaseGuard holds and calls t.ensureRecovered when it changed nothing.
// That spares the claims and completions of a busy plan one statement
// each.
func (s *Store) writeGuarded(ctx context.Context, actor string, fn func(t *txn) error) error {
	return s.writeTx(ctx, txOpts{actor: actor, leasesLater: true}, fn)
}

// writeShared is writeGuarded for a transaction that may run beside
// others like it on a server (txOpts.shared).
func (s *Store) writeShared(ctx context.Context, actor string, fn func(t *txn) error) error {
	return s.writeTx(ctx, txOpts{actor: actor, leasesLater: true, shared: true}, fn)
}

// writeClaim is writeGuarded for a claim: on a server it runs without
// the plan's write lock until fn takes it (txOpts.unlocked).
func (s *Store) writeClaim(ctx context.Context, actor string, fn func(t *txn) error) error {
	return s.writeTx(ctx, txOpts{actor: actor, leasesLater: true, unlocked: true}, fn)
}

// writeNoTask is write for fn that reads and moves no task (landings,
// branch tips, settings): it skips the look for expired claims
// (txOpts.leasesLater).
func (s *Store) writeNoTask(ctx context.Context, fn func(t *txn) error) error {
	return s.writeTx(ctx, txOpts{leasesLater: true}, fn)
}

// writeBulk is write for a bulk load that checks every reference itself
// (txOpts.bulk).
func (s *Store) writeBulk(ctx context.Context, fn func(t *txn) error) error {
	return s.writeTx(ctx, txOpts{bulk: true}, fn)
}

// txOpts say how a write transaction runs; the zero value is a plain
// write, which recovers expired and orphaned claims first and names no
// actor.
type txOpts struct {
	// actor is whom the history names as the mover.
	actor string
	// leasesLater: the transaction does not first return the claims
	// whose lease expired to pending (it still does those whose holder
	// is gone): fn does it itself (writeGuarded) or touches no task
	// (writeNoTask).
	leasesLater bool
	// bulk: a bulk load that checks every reference itself (see
	// sqliteDialect.begin and importer).
	bulk bool
	// unlocked: on a server, the transaction runs without the plan's
	// write lock: fn takes it (t.lock) before it reads anything it then
	// writes (see Server).
	unlocked bool
	// shared: on a server, the transaction holds the plan's lock in its
	// shared form, beside other such transactions: fn locks every row
	// it reads to write (t.forUpdate), and locks rows of tasks in one
	// order, so that two do not wait for each other in a circle (should
	// an odd graph make them, the server's deadlock check ends one, and
	// it runs again). What needs the lock
	// whole (recovering claims: t.lock) ends the try with errWholeLock,
	// and the transaction runs again with it.
	shared bool
}

// errWholeLock ends a try of a write transaction that holds the plan's
// lock in its shared form and needs it whole (txOpts.shared).
var errWholeLock = errors.New("dag: the write needs the plan's whole lock")

// writeTx runs fn in one write transaction. On a server, a transaction
// the server could not take (its connection lost before the commit was
// sent, a restart, a deadlock) runs again with backoff for up to
// ServerOptions.RetryFor; fn must be safe to run again.
func (s *Store) writeTx(ctx context.Context, o txOpts, fn func(t *txn) error) error {
	return s.retrying(ctx, func() (bool, error) {
		committing, err := s.writeOnce(ctx, o, fn)
		if o.shared && errors.Is(err, errWholeLock) {
			whole := o
			whole.shared = false
			return s.writeOnce(ctx, whole, fn)
		}
		return committing, err
	})
}

// writeOnce is one try of writeTx; committing says the error came from
// the commit (whose outcome a lost connection leaves unknown).
func (s *Store) writeOnce(ctx context.Context, o txOpts, fn func(t *txn) error) (committing bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	t, end, err := s.begin(ctx, o)
	if err != nil {
		return false, err
	}
	defer end()
	t.actor = o.actor
	if !o.leasesLater {
		if err := t.ensureRecovered(); err != nil {
			return false, s.dbErr(err)
		}
	} else if _, err := t.recoverOrphans(); err != nil {
		return false, s.dbErr(err)
	}
	// ok is what the write returns once committed: nil, or a refusal
	// whose log entry is kept.
	var ok error
	if err := fn(t); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		var kept *keptError
		if !errors.As(err, &kept) {
			return false, s.dbErr(err)
		}
		ok = kept.err
	}
	if err := s.d.beforeCommit(t); err != nil {
		return false, s.dbErr(err)
	}
	if err := t.commit(); err != nil {
		if errors.As(err, new(heldFailed)) {
			return false, s.dbErr(err) // refused before the COMMIT, which did not run
		}
		return s.commitFailed(ctx, t, err, ok)
	}
	s.d.committed()
	return false, ok
}

// commitFailed is what a write transaction returns when its COMMIT
// failed with err; ok is what it returns committed; committing says its
// outcome is unknown (dialect.commitFailed).
func (s *Store) commitFailed(ctx context.Context, t *txn, err, ok error) (committing bool, rerr error) {
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	return s.d.commitFailed(ctx, t, err, ok)
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// read runs fn's statements on the pool after recovering expired and
// orphaned claims if there are any and the store can be written: a read
// never fails because recovery could not write (the store read-only, the
// disk full, the lock held), nor waits long for it. On SQLite they run in
// one read transaction, a consistent snapshot; on a server connected
// directly each statement runs on its own (dialect.readTx).
func (s *Store) read(ctx context.Context, fn func(t *txn) error) error {
	if err := s.beforeRead(ctx); err != nil {
		return err
	}
	return s.retryRead(ctx, func() error {
		t := &txn{ctx: ctx, now: s.now(), s: s}
		if s.d.readTx() {
			tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				return s.dbErr(err)
			}
			defer tx.Rollback()
			t.tx = tx
		}
		if err := fn(t); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return s.dbErr(err)
		}
		return nil
	})
}

// retryRead runs a read; on a server, one the server could not serve (a
// restart, a lost connection) runs again with backoff for up to
// ServerOptions.RetryFor.
func (s *Store) retryRead(ctx context.Context, try func() error) error {
	return s.retrying(ctx, func() (bool, error) { return false, try() })
}

// retrying runs try, a read or a write transaction; one the database
// could not take (dialect.retryable: committing says the error came from
// the commit) runs again with backoff for up to the store's retryFor. On
// SQLite it runs once.
func (s *Store) retrying(ctx context.Context, try func() (committing bool, err error)) error {
	deadline := time.Now().Add(s.retryFor)
	wait := serverBackoff
	for {
		committing, err := try()
		s.heard(ctx, err, committing)
		if err == nil || ctx.Err() != nil || !s.d.retryable(err, committing) || time.Now().Add(wait).After(deadline) {
			return err
		}
		if serr := sleepCtx(ctx, wait); serr != nil {
			return serr
		}
		wait = min(2*wait, serverBackoffMax)
	}
}

// heard tells the store's trouble (ServerOptions.OnTrouble) what a call
// to the server heard: an error a retry may cure says the server does
// not answer; success, or a refusal (an error that is no trouble of the
// connection's: not Temporary), says it answers. Anything else — the
// call's context ending, a commit whose fate a lost connection hides, a
// write that waited too long for the one before it — says neither.
func (s *Store) heard(ctx context.Context, err error, committing bool) {
	var tmp interface{ Temporary() bool }
	switch {
	case s.trouble == nil || ctx.Err() != nil:
	case err == nil:
		s.trouble.answered()
	case s.d.retryable(err, committing):
		s.trouble.failed(err)
	case !committing && !(errors.As(err, &tmp) && tmp.Temporary()):
		s.trouble.answered()
	}
}

// beforeRead recovers expired and orphaned claims for a read, if there are
// any and the store can be written, giving up quietly after a short wait.
// On a server, a look-up that failed because a connection of the pool was
// lost (a restart) is tried again within that wait: the read after a
// restart recovers what expired meanwhile.
func (s *Store) beforeRead(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.readOnly == nil {
		rctx, cancel := context.WithTimeout(ctx, readRecoverWait)
		err := s.retryRead(rctx, func() error { return s.recoverIfAny(rctx) })
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = err // recovery is the next writer's business then
	}
	return nil
}

// readRaw is read for long scans: fn gets one read transaction on a
// connection of the pool used through its driver, as the writer's is
// (see wconn): database/sql's Rows cost a scan of a whole plan more than
// SQLite's reading did. fn must not keep c.
func (s *Store) readRaw(ctx context.Context, fn func(c *wconn) error) error {
	if err := s.beforeRead(ctx); err != nil {
		return err
	}
	return s.retryRead(ctx, func() error { return s.readRawOnce(ctx, fn) })
}

func (s *Store) readRawOnce(ctx context.Context, fn func(c *wconn) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.dbErr(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		c := &wconn{c: dc.(driver.Conn), stmts: map[string]*wstmt{}, d: s.d}
		defer func() {
			for _, st := range c.stmts {
				st.st.Close()
			}
		}()
		if _, err := c.exec(ctx, "BEGIN"); err != nil {
			return err
		}
		// The context may have ended: end the transaction regardless.
		defer c.exec(context.Background(), "ROLLBACK")
		return fn(c)
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return s.dbErr(err)
}

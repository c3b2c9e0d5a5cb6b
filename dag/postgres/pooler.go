package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// A connection pooler in transaction pooling (PgBouncer's pool_mode =
// transaction, as managed PostgreSQL is often reached) hands each
// transaction whichever server connection is free: what a session keeps
// beyond its transaction — startup parameters, named prepared
// statements, LISTEN, session advisory locks — is lost or, worse, lands
// on another client's transactions. PgBouncer 1.18 refuses the startup
// parameters ralph sets (search_path, idle_in_transaction_session_timeout)
// outright; configured to ignore them, it drops them. Either way ralph
// knows (pooled) and keeps nothing in the session:
//
//   - each transaction sets the plan's search path and the idle timeout
//     for itself: BEGIN is sent as "BEGIN; SELECT set_config(…, true)",
//     one round trip as before, and a statement outside a transaction
//     runs in one of its own that does (pooledConn);
//   - no statement is prepared by name: statements go out with pgx's
//     QueryExecModeCacheDescribe (an unnamed statement each time, its
//     description cached by the client), which a pooler passes through;
//   - waiting loops and viewers look for changes every pollEvery instead
//     of listening (poller), and a viewer takes no advisory lock.

// isRefusedParam reports whether err is a server's (a pooler's) refusal
// of a startup parameter.
func isRefusedParam(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "08P01" && strings.Contains(pe.Message, "unsupported startup parameter")
}

// withoutSessionParams returns a copy of cc for a pooler: none of ralph's
// startup parameters, no statement prepared by name.
func withoutSessionParams(cc *pgx.ConnConfig) *pgx.ConnConfig {
	out := cc.Copy()
	delete(out.RuntimeParams, "search_path")
	delete(out.RuntimeParams, "idle_in_transaction_session_timeout")
	out.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	return out
}

// sessionSetup is what each transaction of a plan's store runs first
// behind a pooler, in place of the session's startup parameters.
func sessionSetup(schema string) string {
	return fmt.Sprintf("SELECT set_config('search_path', %s, true), set_config('idle_in_transaction_session_timeout', '%d', true)",
		quoteLiteral(schema), idleInTransaction.Milliseconds())
}

// quoteLiteral quotes s as an SQL string literal (standard conforming
// strings: quotes doubled, backslashes as they are).
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// pooledConnector makes pooledConns.
type pooledConnector struct {
	driver.Connector
	setup string
}

func (c pooledConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pooledConn{Conn: dc.(*stdlib.Conn), setup: c.setup}, nil
}

// pooledConn is pgx's database/sql connection for a pooler: its prepared
// statements are the query's text (pooledStmt), and a transaction sets
// up its session first (setup).
type pooledConn struct {
	*stdlib.Conn
	setup string
}

var (
	_ driver.ConnPrepareContext = (*pooledConn)(nil)
	_ driver.ConnBeginTx        = (*pooledConn)(nil)
	_ driver.ExecerContext      = (*pooledConn)(nil)
	_ driver.QueryerContext     = (*pooledConn)(nil)
	_ driver.NamedValueChecker  = (*pooledConn)(nil)
)

func (c *pooledConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *pooledConn) PrepareContext(_ context.Context, q string) (driver.Stmt, error) {
	return &pooledStmt{c: c, q: q}, nil
}

// inTx reports whether the connection is in a transaction block, as the
// server's last ReadyForQuery said.
func (c *pooledConn) inTx() bool { return c.Conn.Conn().PgConn().TxStatus() != 'I' }

// ExecContext runs q; a bare BEGIN (package dag's write transactions and
// long reads start so) also sets up the session, and a statement outside
// a transaction runs in one of its own that does (see QueryContext).
func (c *pooledConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	switch {
	case c.inTx():
		return c.Conn.ExecContext(ctx, q, args)
	case len(args) == 0 && strings.EqualFold(strings.TrimSpace(q), "BEGIN"):
		return c.Conn.ExecContext(ctx, "BEGIN; "+c.setup, nil)
	case len(args) == 0:
		return c.Conn.ExecContext(ctx, "BEGIN; "+c.setup+"; "+q+"; COMMIT", nil)
	}
	if _, err := c.Conn.ExecContext(ctx, "BEGIN; "+c.setup, nil); err != nil {
		return nil, err
	}
	res, err := c.Conn.ExecContext(ctx, q, args)
	if err != nil {
		c.Conn.ExecContext(context.Background(), "ROLLBACK", nil)
		return nil, err
	}
	if _, err := c.Conn.ExecContext(ctx, "COMMIT", nil); err != nil {
		return nil, err
	}
	return res, nil
}

// QueryContext runs q. Outside a transaction (package dag's look for
// expired claims before a read, say) it runs in a transaction of its own
// that sets up the session first, committed when its rows are closed:
// two round trips more, behind a pooler only.
func (c *pooledConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if c.inTx() {
		return c.Conn.QueryContext(ctx, q, args)
	}
	if _, err := c.Conn.ExecContext(ctx, "BEGIN; "+c.setup, nil); err != nil {
		return nil, err
	}
	rows, err := c.Conn.QueryContext(ctx, q, args)
	if err != nil {
		c.Conn.ExecContext(context.Background(), "ROLLBACK", nil)
		return nil, err
	}
	return &committingRows{Rows: rows, c: c}, nil
}

// committingRows commits the transaction of a pooledConn.QueryContext
// when closed.
type committingRows struct {
	driver.Rows
	c *pooledConn
}

func (r *committingRows) Close() error {
	err := r.Rows.Close()
	if _, cerr := r.c.Conn.ExecContext(context.Background(), "COMMIT", nil); err == nil {
		err = cerr
	}
	return err
}

// BeginTx starts a transaction and sets up its session, in one round
// trip. Only the default isolation level is asked for by package dag.
func (c *pooledConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.Isolation != driver.IsolationLevel(0) {
		return nil, fmt.Errorf("postgres: isolation level %d behind a pooler: not supported", opts.Isolation)
	}
	begin := "BEGIN"
	if opts.ReadOnly {
		begin += " READ ONLY"
	}
	if _, err := c.Conn.ExecContext(ctx, begin+"; "+c.setup, nil); err != nil {
		return nil, err
	}
	return pooledTx{c}, nil
}

func (c *pooledConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

type pooledTx struct{ c *pooledConn }

func (t pooledTx) Commit() error {
	_, err := t.c.Conn.ExecContext(context.Background(), "COMMIT", nil)
	return err
}

func (t pooledTx) Rollback() error {
	_, err := t.c.Conn.ExecContext(context.Background(), "ROLLBACK", nil)
	return err
}

// pooledStmt is a statement prepared nowhere: each use sends its text.
type pooledStmt struct {
	c *pooledConn
	q string
}

var (
	_ driver.StmtExecContext  = (*pooledStmt)(nil)
	_ driver.StmtQueryContext = (*pooledStmt)(nil)
)

func (s *pooledStmt) Close() error  { return nil }
func (s *pooledStmt) NumInput() int { return -1 }

func (s *pooledStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.ExecContext(ctx, s.q, args)
}

func (s *pooledStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.QueryContext(ctx, s.q, args)
}

func (s *pooledStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *pooledStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return nv
}

// pollEvery is how often a wait behind a pooler asks the server whether
// the plan changed: the pickup of a task there is up to this long.
const pollEvery = 100 * time.Millisecond

// poller is the changeSource behind a pooler, where LISTEN does not
// work (a notification reaches whichever client holds the server
// connection then). Its token is a digest of what the plan's triggers
// notify of — the counts by status, which every status change but a
// claim's moves — and of the claims (task and generation): a change that
// can make a task ready or end a claim changes it, and so does a claim,
// which a viewer wants. One query of a few index reads, schema-qualified
// (it runs outside a transaction, with no search path).
type poller struct {
	db *sql.DB
	q  string
}

func newPoller(db *sql.DB, schema string) *poller {
	s := pgx.Identifier{schema}.Sanitize()
	// sha256, not md5, which a server in FIPS mode refuses.
	return &poller{db: db, q: fmt.Sprintf(`SELECT encode(sha256(convert_to(
		coalesce((SELECT string_agg(feature || '/' || status || '=' || n, ',' ORDER BY feature, status)
			FROM (SELECT feature, status, sum(n) AS n FROM %[1]s.status_counts GROUP BY 1, 2) AS c), '')
		|| ';' || coalesce((SELECT string_agg(id || '/' || generation, ',' ORDER BY id) FROM %[1]s.tasks WHERE status = 'in_progress'), ''),
		'UTF8')), 'hex')`, s)}
}

func (p *poller) token(ctx context.Context) (string, error) {
	var t string
	err := p.db.QueryRowContext(ctx, p.q).Scan(&t)
	return t, err
}

// wait asks every pollEvery until the token differs (true), d passes
// (false) or ctx ends. A question the server does not answer counts as a
// change: the caller reads the plan again, through the store's retries.
func (p *poller) wait(ctx context.Context, token string, d time.Duration) (bool, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-tick.C:
		}
		now, err := p.token(ctx)
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil || now != token {
			return true, nil
		}
	}
}

func (p *poller) close() {}

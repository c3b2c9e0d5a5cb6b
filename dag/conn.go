package dag

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// wconn is the connection every write transaction of a Store runs on,
// opened from the driver directly and used only under the write lock.
// database/sql costs each statement a Tx-bound Stmt, connection
// bookkeeping and locks; a claim and its completion run some ten small
// statements, and that overhead was a third of their CPU time, all of it
// spent while holding the lock every other process waits for.
type wconn struct {
	c     driver.Conn
	stmts map[string]*wstmt
	// ckptAt is when the connection last checkpointed (or opened);
	// unckpt says it has committed since.
	ckptAt time.Time
	unckpt bool
	// d is the store's driver: its rebind turns the package's queries
	// into the database's dialect.
	d dialect
	// held are the statements held back (later), to go with the next.
	held []BatchQuery
}

// Batcher is implemented by a server's driver connections
// (Server.Connector's) that send several statements in one round trip.
// The writer's connection then holds back a statement whose answer is
// only whether it failed — a transaction's BEGIN, a history entry
// (wconn.later) — and sends it with the statement after it: a claim and
// its completion take five round trips instead of nine.
type Batcher interface {
	// Batch runs qs in order in one round trip, up to the first that
	// fails. It returns the rows of the last, read in whole, and how many
	// rows it changed. A statement the server refused is named by a
	// *BatchError (the ones after it did not run); any other error (a
	// lost connection) may have come after any of them ran.
	Batch(ctx context.Context, qs []BatchQuery) (BatchResult, error)
}

// BatchQuery is one statement of a Batch, in the server's dialect.
type BatchQuery struct {
	SQL  string
	Args []driver.NamedValue
}

// BatchResult is what the last statement of a Batch returned; its values
// are of the types database/sql's drivers return (int64, float64, bool,
// []byte, string, time.Time, nil).
type BatchResult struct {
	Columns      []string
	Rows         [][]driver.Value
	RowsAffected int64
}

// BatchError is the server's refusal of statement Index of a Batch.
type BatchError struct {
	Index int
	Err   error
}

func (e *BatchError) Error() string { return e.Err.Error() }
func (e *BatchError) Unwrap() error { return e.Err }

// heldFailed is the error of a statement held back (wconn.later), come
// with the statement sent after it, which did not run.
type heldFailed struct{ error }

func (e heldFailed) Unwrap() error { return e.error }

// later runs q now, or, on a connection that batches, with the next
// statement: its error comes back from that one, as a heldFailed.
func (w *wconn) later(ctx context.Context, q string, args ...any) error {
	if _, ok := w.c.(Batcher); !ok {
		_, err := w.exec(ctx, q, args...)
		return err
	}
	nv, err := namedValues(args)
	if err != nil {
		return err
	}
	w.held = append(w.held, BatchQuery{SQL: w.d.rebind(q), Args: nv})
	return nil
}

// discard forgets the statements held back (the transaction is rolled
// back unsent).
func (w *wconn) discard() { w.held = nil }

// flush sends the statements held back, then q, in one round trip.
func (w *wconn) flush(ctx context.Context, q string, args []any) (BatchResult, error) {
	nv, err := namedValues(args)
	if err != nil {
		return BatchResult{}, err
	}
	qs := append(w.held, BatchQuery{SQL: w.d.rebind(q), Args: nv})
	w.held = nil
	res, err := w.c.(Batcher).Batch(ctx, qs)
	if be, ok := err.(*BatchError); ok {
		err = be.Err
		if be.Index < len(qs)-1 {
			err = heldFailed{err}
		}
	}
	return res, err
}

// wstmt is a prepared statement of the writer's connection; busy while
// rows of it are open, so that a nested use prepares a fresh one.
type wstmt struct {
	st   driver.Stmt
	busy bool
}

func (w *wconn) close() error {
	for _, st := range w.stmts {
		st.st.Close()
	}
	w.stmts = nil
	return w.c.Close()
}

// prepare returns q prepared on the writer's connection; done releases it.
func (w *wconn) prepare(ctx context.Context, q string) (st driver.Stmt, done func(), err error) {
	if ws, ok := w.stmts[q]; ok && !ws.busy {
		ws.busy = true
		return ws.st, func() { ws.busy = false }, nil
	}
	st, err = w.c.(driver.ConnPrepareContext).PrepareContext(ctx, w.d.rebind(q))
	if err != nil {
		return nil, nil, err
	}
	if _, ok := w.stmts[q]; ok {
		// In use further up the stack: this one is not kept.
		return st, func() { st.Close() }, nil
	}
	ws := &wstmt{st: st, busy: true}
	w.stmts[q] = ws
	return st, func() { ws.busy = false }, nil
}

func (w *wconn) exec(ctx context.Context, q string, args ...any) (driver.Result, error) {
	if len(w.held) > 0 {
		res, err := w.flush(ctx, q, args)
		if err != nil {
			return nil, err
		}
		return driver.RowsAffected(res.RowsAffected), nil
	}
	st, done, err := w.prepare(ctx, q)
	if err != nil {
		return nil, err
	}
	defer done()
	nv, err := namedValues(args)
	if err != nil {
		return nil, err
	}
	return st.(driver.StmtExecContext).ExecContext(ctx, nv)
}

// pragma runs PRAGMA p on the connection, outside the statement cache:
// flag pragmas change how statements compile, and SQLite expires the
// prepared ones. SQLite's driver alone calls it.
func (w *wconn) pragma(ctx context.Context, p string) error {
	_, err := w.c.(driver.ExecerContext).ExecContext(ctx, "PRAGMA "+p, nil)
	return err
}

func (w *wconn) query(ctx context.Context, q string, args ...any) (*wrows, error) {
	if len(w.held) > 0 {
		res, err := w.flush(ctx, q, args)
		if err != nil {
			return nil, err
		}
		return &wrows{r: &batchRows{res: res}, done: func() {}}, nil
	}
	st, done, err := w.prepare(ctx, q)
	if err != nil {
		return nil, err
	}
	nv, err := namedValues(args)
	if err != nil {
		done()
		return nil, err
	}
	r, err := st.(driver.StmtQueryContext).QueryContext(ctx, nv)
	if err != nil {
		done()
		return nil, err
	}
	return &wrows{r: r, done: done}, nil
}

// namedValues converts the argument types the package passes.
func namedValues(args []any) ([]driver.NamedValue, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		var v driver.Value
		switch a := a.(type) {
		case nil, int64, float64, bool, []byte, string:
			v = a
		case int:
			v = int64(a)
		default:
			var err error
			if v, err = driver.DefaultParameterConverter.ConvertValue(a); err != nil {
				return nil, fmt.Errorf("dag: argument %d: %w", i+1, err)
			}
		}
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv, nil
}

// rowSet is what the helpers of txn return for a query: *sql.Rows in a
// read transaction, *wrows in a write transaction.
type rowSet interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// wrows are the rows of a query on the writer's connection, with the
// methods of *sql.Rows that the package uses.
type wrows struct {
	r      driver.Rows
	done   func()
	vals   []driver.Value
	err    error
	closed bool
}

func (r *wrows) Next() bool {
	if r.closed {
		return false
	}
	if r.vals == nil {
		r.vals = make([]driver.Value, len(r.r.Columns()))
	}
	if err := r.r.Next(r.vals); err != nil {
		if err != io.EOF {
			r.err = err
		}
		r.Close()
		return false
	}
	return true
}

func (r *wrows) Scan(dest ...any) error {
	if r.closed || r.vals == nil {
		return errors.New("dag: Scan called without a row")
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("dag: Scan: %d destinations for %d columns", len(dest), len(r.vals))
	}
	for i, d := range dest {
		if err := assign(d, r.vals[i]); err != nil {
			return fmt.Errorf("dag: Scan column %d: %w", i, err)
		}
	}
	return nil
}

func (r *wrows) Err() error { return r.err }

func (r *wrows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.r.Close()
	r.done()
	if r.err == nil {
		r.err = err
	}
	return err
}

// batchRows are a BatchResult's rows as a driver's.
type batchRows struct {
	res BatchResult
	i   int
}

func (r *batchRows) Columns() []string { return r.res.Columns }
func (r *batchRows) Close() error      { return nil }

func (r *batchRows) Next(dest []driver.Value) error {
	if r.i >= len(r.res.Rows) {
		return io.EOF
	}
	copy(dest, r.res.Rows[r.i])
	r.i++
	return nil
}

// wrow is the first row of a query, like *sql.Row.
type wrow struct {
	rows *wrows
	err  error
}

func (r wrow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	return r.rows.Close()
}

// assign stores a value of the driver in one of the destination types the
// package scans into.
func assign(dest any, v driver.Value) error {
	switch d := dest.(type) {
	case *string:
		switch v := v.(type) {
		case string:
			*d = v
		case []byte:
			*d = string(v)
		case int64:
			*d = strconv.FormatInt(v, 10)
		case float64:
			*d = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			return fmt.Errorf("cannot store %T in *string", v)
		}
	case *int64:
		n, err := asInt(v)
		if err != nil {
			return err
		}
		*d = n
	case *int:
		n, err := asInt(v)
		if err != nil {
			return err
		}
		*d = int(n)
	case *bool:
		n, err := asInt(v)
		if err != nil {
			return err
		}
		*d = n != 0
	case *float64:
		switch v := v.(type) {
		case float64:
			*d = v
		case int64:
			*d = float64(v)
		default:
			return fmt.Errorf("cannot store %T in *float64", v)
		}
	case *any:
		*d = v
	case sql.Scanner:
		return d.Scan(v)
	default:
		return fmt.Errorf("unsupported destination %T", dest)
	}
	return nil
}

func asInt(v driver.Value) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case float64:
		if v == float64(int64(v)) {
			return int64(v), nil
		}
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	case []byte:
		return strconv.ParseInt(string(v), 10, 64)
	}
	return 0, fmt.Errorf("cannot store %T (%v) in an integer", v, v)
}

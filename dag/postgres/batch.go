package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ralph-dev/ralph/dag"
)

// batchConnector makes batchConns: connections on which the writer sends
// a statement whose answer nobody waits for with the next one
// (dag.Batcher). Behind a pooler there is none: pgx describes a batch's
// new statements before the batch, outside the transaction that sets the
// plan's search path (pooledConn).
type batchConnector struct{ driver.Connector }

func (c batchConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return batchConn{dc.(*stdlib.Conn)}, nil
}

// batchConn is pgx's database/sql connection, and a dag.Batcher.
type batchConn struct{ *stdlib.Conn }

var _ dag.Batcher = batchConn{}

// Batch implements dag.Batcher with a pgx batch: one round trip, the
// statements prepared once each (pgx's statement cache).
func (c batchConn) Batch(ctx context.Context, qs []dag.BatchQuery) (dag.BatchResult, error) {
	var b pgx.Batch
	for _, q := range qs {
		args := make([]any, len(q.Args))
		for i, a := range q.Args {
			args[i] = a.Value
		}
		b.Queue(q.SQL, args...)
	}
	conn := c.Conn.Conn()
	br := conn.SendBatch(ctx, &b)
	defer br.Close()
	refused := func(i int, err error) error {
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
			return &dag.BatchError{Index: i, Err: err}
		}
		return err
	}
	for i := range len(qs) - 1 {
		if _, err := br.Exec(); err != nil {
			return dag.BatchResult{}, refused(i, err)
		}
	}
	last := len(qs) - 1
	rows, err := br.Query()
	if err != nil {
		return dag.BatchResult{}, refused(last, err)
	}
	defer rows.Close()
	var res dag.BatchResult
	fields := rows.FieldDescriptions()
	for _, f := range fields {
		res.Columns = append(res.Columns, f.Name)
	}
	m := conn.TypeMap()
	for rows.Next() {
		raw := rows.RawValues()
		row := make([]driver.Value, len(raw))
		for i, f := range fields {
			if row[i], err = driverValue(m, f, raw[i]); err != nil {
				return dag.BatchResult{}, err
			}
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return dag.BatchResult{}, refused(last, err)
	}
	res.RowsAffected = rows.CommandTag().RowsAffected()
	if err := br.Close(); err != nil {
		return dag.BatchResult{}, refused(last, err)
	}
	return res, nil
}

// driverValue decodes a value of field f as pgx's database/sql driver
// does (stdlib's Rows.Next), so that a statement's rows read the same
// whether it went alone or in a batch: integers as int64, floats as
// float64, bytea, JSON and XML as []byte, OIDs as int64, dates and
// timestamps as time.Time (an infinite one as its text), anything else
// as the server's text. A column of another type that pgx asked for in
// binary is an error rather than a value of another form.
func driverValue(m *pgtype.Map, f pgconn.FieldDescription, raw []byte) (driver.Value, error) {
	if raw == nil {
		return nil, nil
	}
	switch f.DataTypeOID {
	case pgtype.BoolOID:
		return scanAs[bool](m, f, raw)
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		return scanAs[int64](m, f, raw)
	case pgtype.Float4OID, pgtype.Float8OID:
		return scanAs[float64](m, f, raw)
	case pgtype.ByteaOID, pgtype.JSONOID, pgtype.JSONBOID, pgtype.XMLOID:
		return scanAs[[]byte](m, f, raw)
	case pgtype.CIDOID, pgtype.OIDOID, pgtype.XIDOID:
		return valueAs[pgtype.Uint32](m, f, raw)
	case pgtype.DateOID:
		return valueAs[pgtype.Date](m, f, raw)
	case pgtype.TimestampOID:
		return valueAs[pgtype.Timestamp](m, f, raw)
	case pgtype.TimestamptzOID:
		return valueAs[pgtype.Timestamptz](m, f, raw)
	}
	if f.Format == pgtype.BinaryFormatCode {
		// database/sql's driver asks for these in the server's text; a
		// batch cannot, and pgx's text of a decoded value is not always
		// the server's (an interval, an array).
		return nil, fmt.Errorf("dag/postgres: column %s (type OID %d) came in binary, which a batch cannot read as database/sql does: cast it to text", f.Name, f.DataTypeOID)
	}
	return scanAs[string](m, f, raw)
}

// scanAs decodes raw into a T.
func scanAs[T any](m *pgtype.Map, f pgconn.FieldDescription, raw []byte) (driver.Value, error) {
	var v T
	if err := m.Scan(f.DataTypeOID, f.Format, raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// valueAs decodes raw into a pgtype's T, then takes its driver.Value.
func valueAs[T any, PT interface {
	*T
	driver.Valuer
}](m *pgtype.Map, f pgconn.FieldDescription, raw []byte) (driver.Value, error) {
	var v T
	if err := m.Scan(f.DataTypeOID, f.Format, raw, PT(&v)); err != nil {
		return nil, err
	}
	return PT(&v).Value()
}

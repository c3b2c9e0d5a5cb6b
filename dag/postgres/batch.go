package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"

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
// does (stdlib's Rows.Next): integers as int64, floats as float64, bytea
// and JSON as []byte, times as time.Time, anything else as its text.
func driverValue(m *pgtype.Map, f pgconn.FieldDescription, raw []byte) (driver.Value, error) {
	if raw == nil {
		return nil, nil
	}
	oid := f.DataTypeOID
	switch oid {
	case pgtype.BoolOID:
		return scanAs[bool](m, f, raw)
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		return scanAs[int64](m, f, raw)
	case pgtype.Float4OID, pgtype.Float8OID:
		return scanAs[float64](m, f, raw)
	case pgtype.ByteaOID, pgtype.JSONOID, pgtype.JSONBOID:
		return scanAs[[]byte](m, f, raw)
	case pgtype.TimestampOID, pgtype.TimestamptzOID, pgtype.DateOID:
		return scanAs[time.Time](m, f, raw)
	}
	return scanAs[string](m, f, raw)
}

func scanAs[T any](m *pgtype.Map, f pgconn.FieldDescription, raw []byte) (driver.Value, error) {
	var v T
	if err := m.Scan(f.DataTypeOID, f.Format, raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

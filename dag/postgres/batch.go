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

// sqlBinary are the types pgx's database/sql driver asks the server for
// in binary (stdlib's databaseSQLResultFormats); every other comes in the
// server's text there.
var sqlBinary = map[uint32]bool{
	pgtype.BoolOID: true, pgtype.ByteaOID: true, pgtype.CIDOID: true, pgtype.DateOID: true,
	pgtype.Float4OID: true, pgtype.Float8OID: true, pgtype.Int2OID: true, pgtype.Int4OID: true,
	pgtype.Int8OID: true, pgtype.OIDOID: true, pgtype.TimestampOID: true,
	pgtype.TimestamptzOID: true, pgtype.XIDOID: true,
}

// driverValue decodes a value of field f as pgx's database/sql driver
// does, so that a statement's rows read the same whether it went alone
// or in a batch: by the type's codec (DecodeDatabaseSQLValue, which
// stdlib's Rows.Next matches), an unknown type as its text. A batch
// cannot choose its result formats, so pgx may get in binary a type the
// driver reads as the server's text (an interval, an array, numeric):
// that is an error, not a value of another form.
func driverValue(m *pgtype.Map, f pgconn.FieldDescription, raw []byte) (driver.Value, error) {
	if raw == nil {
		return nil, nil
	}
	if f.Format == pgtype.BinaryFormatCode && !sqlBinary[f.DataTypeOID] {
		return nil, fmt.Errorf("dag/postgres: column %s (type OID %d) came in binary, which a batch cannot read as database/sql does: cast it to text", f.Name, f.DataTypeOID)
	}
	if t, ok := m.TypeForOID(f.DataTypeOID); ok {
		return t.Codec.DecodeDatabaseSQLValue(m, f.DataTypeOID, f.Format, raw)
	}
	return string(raw), nil
}

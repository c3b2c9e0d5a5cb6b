package postgres

import (
	"database/sql"
	"database/sql/driver"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// TestBatchValuesAsStdlib: a row read from a batch (a statement sent with
// the ones held before it, dag.Batcher) holds the values pgx's
// database/sql driver gives for the same row, type by type; a type the
// driver reads in the server's text and a batch gets in binary is an
// error, not a value of another form.
func TestBatchValuesAsStdlib(t *testing.T) {
	cc, err := pgx.ParseConfig(pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	connector := batchConnector{stdlib.GetConnector(*cc)}
	c, err := connector.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db := sql.OpenDB(connector)
	defer db.Close()

	same := `SELECT 1::int2, 2::int4, 3::int8, 1.5::float4, 2.5::float8, true, 'x'::text,
		'v'::varchar(4), '\x0102'::bytea, '{"a": 1}'::json, '{"a": 1}'::jsonb, '<a/>'::xml,
		7::oid, '8'::xid, '9'::cid, '2026-11-29'::date, 'infinity'::date,
		'2026-11-29 01:02:03.456'::timestamp, '2026-11-29 01:02:03+01'::timestamptz,
		'-infinity'::timestamptz, 12.5::numeric::text, '1 day 2 hours'::interval::text,
		ARRAY[1, 2]::text, NULL::text, NULL::int8, pg_backend_pid() > 0 WHERE $1::int > 0`
	want := sqlRow(t, db, same, int64(1))
	res, err := c.(dag.Batcher).Batch(t.Context(), []dag.BatchQuery{
		{SQL: "SELECT 1"},
		{SQL: same, Args: []driver.NamedValue{{Ordinal: 1, Value: int64(1)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 {
		t.Fatalf("batch: %d rows, want 1", len(res.Rows))
	}
	got := make([]any, len(res.Rows[0]))
	for i, v := range res.Rows[0] {
		got[i] = v
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batch row differs from database/sql's (-sql +batch):\n%s", diff)
	}

	for _, q := range []string{`SELECT '1 day 2 hours'::interval`, `SELECT ARRAY[1, 2]`, `SELECT 12.5::numeric`} {
		res, err := c.(dag.Batcher).Batch(t.Context(), []dag.BatchQuery{{SQL: q}})
		if err == nil || !strings.Contains(err.Error(), "cast it to text") {
			t.Errorf("%s in a batch: %v, %v; want an error that says to cast it to text", q, res.Rows, err)
		}
	}
}

// sqlRow is the one row of q through database/sql.
func sqlRow(t *testing.T, db *sql.DB, q string, args ...any) []any {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	row := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range row {
		ptrs[i] = &row[i]
	}
	if !rows.Next() {
		t.Fatalf("%s: no row: %v", q, rows.Err())
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	return row
}

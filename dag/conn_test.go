package dag

import (
	"database/sql/driver"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAssign checks the conversions of the writer's row scanning, which
// stand in for database/sql's on the write path.
func TestAssign(t *testing.T) {
	tests := []struct {
		name    string
		value   driver.Value
		dest    func() any
		want    any
		wantErr bool
	}{
		{"text to string", "abc", func() any { return new(string) }, "abc", false},
		{"blob to string", []byte("abc"), func() any { return new(string) }, "abc", false},
		{"integer to string", int64(42), func() any { return new(string) }, "42", false},
		{"null to string", nil, func() any { return new(string) }, "", true},
		{"integer to int", int64(7), func() any { return new(int) }, 7, false},
		{"integer to int64", int64(1) << 40, func() any { return new(int64) }, int64(1) << 40, false},
		{"whole real to int", 3.0, func() any { return new(int) }, 3, false},
		{"fraction to int", 3.5, func() any { return new(int) }, 0, true},
		{"null to int", nil, func() any { return new(int) }, 0, true},
		{"text to int", "x", func() any { return new(int) }, 0, true},
		{"one to bool", int64(1), func() any { return new(bool) }, true, false},
		{"zero to bool", int64(0), func() any { return new(bool) }, false, false},
		{"real to float64", 0.25, func() any { return new(float64) }, 0.25, false},
		{"integer to float64", int64(2), func() any { return new(float64) }, 2.0, false},
		{"text to float64", "x", func() any { return new(float64) }, 0.0, true},
		{"null to any", nil, func() any { return new(any) }, nil, false},
		{"unsupported destination", int64(1), func() any { return new(uint8) }, uint8(0), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := tt.dest()
			err := assign(dest, tt.value)
			if (err != nil) != tt.wantErr {
				t.Fatalf("assign(%T, %#v) error = %v, want error: %v", dest, tt.value, err, tt.wantErr)
			}
			var got any
			switch d := dest.(type) {
			case *string:
				got = *d
			case *int:
				got = *d
			case *int64:
				got = *d
			case *bool:
				got = *d
			case *float64:
				got = *d
			case *any:
				got = *d
			case *uint8:
				got = *d
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("assign(%T, %#v) (-want +got):\n%s", dest, tt.value, diff)
			}
		})
	}
}

// TestWriterNestedQuery runs a statement while rows of the same statement
// are still open on the writer's connection: the nested use must get a
// statement of its own, not reset the open one.
func TestWriterNestedQuery(t *testing.T) {
	s := newTestStore(t, nil)
	for _, title := range []string{"a", "b", "c"} {
		if _, err := s.Add(t.Context(), AddParams{Title: title}); err != nil {
			t.Fatal(err)
		}
	}
	const q = `SELECT id FROM tasks ORDER BY seq`
	var outer, inner []string
	err := s.write(t.Context(), func(tx *txn) error {
		rows, err := tx.query(q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			outer = append(outer, id)
			if len(outer) == 1 {
				if inner, err = tx.ids(q); err != nil {
					return err
				}
			}
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"t-1", "t-2", "t-3"}
	if diff := cmp.Diff(want, outer); diff != "" {
		t.Errorf("outer rows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, inner); diff != "" {
		t.Errorf("nested rows (-want +got):\n%s", diff)
	}
}

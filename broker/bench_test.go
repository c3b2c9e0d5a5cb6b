package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// BenchmarkRoundTrip measures what the broker adds to a store call, in
// one process: a peek's three calls (Ready of 10, Active, Counts) on a
// SQLite plan of 1,000 tasks, directly and through a broker — over one
// connection, and with a connection (and its peer check) of its own as
// each `ralph task` process makes.
func BenchmarkRoundTrip(b *testing.B) {
	st, err := dag.Open(b.Context(), filepath.Join(b.TempDir(), "progress.db"), dag.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for i := range 1000 {
		if _, err := st.AddTask(b.Context(), loop.NewTask{Title: fmt.Sprintf("Task %d", i), Priority: i % 5}); err != nil {
			b.Fatal(err)
		}
	}
	peekCalls := func(b *testing.B, p interface {
		Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error)
		Active(ctx context.Context, scope loop.Scope) ([]loop.Task, error)
		Counts(ctx context.Context, scope loop.Scope) (loop.Counts, error)
	}) {
		ctx := b.Context()
		if _, err := p.Ready(ctx, loop.Scope{}, 10); err != nil {
			b.Fatal(err)
		}
		if _, err := p.Active(ctx, loop.Scope{}); err != nil {
			b.Fatal(err)
		}
		if _, err := p.Counts(ctx, loop.Scope{}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			peekCalls(b, st)
		}
	})
	srv := start(b, peek(st, "agent-a"))
	if err := srv.Admit(os.Getpid()); err != nil {
		b.Fatal(err)
	}
	b.Run("broker", func(b *testing.B) {
		c := dial(b, srv.Path())
		for b.Loop() {
			peekCalls(b, c)
		}
	})
	b.Run("broker-connection-each", func(b *testing.B) {
		for b.Loop() {
			c, err := broker.Dial(b.Context(), srv.Path())
			if err != nil {
				b.Fatal(err)
			}
			peekCalls(b, c)
			c.Close()
		}
	})
}

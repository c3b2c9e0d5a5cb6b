package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
)

// TestPooler: through PgBouncer in transaction pooling — one that refuses
// ralph's startup parameters (its default) and one that drops them — a
// plan is made, claimed and completed; waits hear another machine's
// changes by asking (claims included) and time out when there are none;
// a viewer takes no advisory lock; and nothing ralph set is left in the
// server's sessions, which the pooler hands to other clients.
func TestPooler(t *testing.T) {
	for _, c := range []struct {
		name   string
		pooled func(testing.TB) (string, string)
	}{{"refuses", pgtest.Pooled}, {"drops", pgtest.PooledLax}} {
		t.Run(c.name, func(t *testing.T) {
			url, direct := c.pooled(t)
			ctx := t.Context()
			waiter := openNamed(t, url, "pooled", dag.ServerOptions{})
			other := openNamed(t, url, "pooled", dag.ServerOptions{})
			if _, err := other.Import(ctx, []dag.ImportTask{{ID: "a", Title: "a"}, {ID: "b", Title: "b", BlockedBy: []string{"a"}}}); err != nil {
				t.Fatal(err)
			}
			wakes := func(what string, change func() error) {
				t.Helper()
				tok, err := waiter.ChangeToken(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := change(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if changed, err := waiter.WaitChange(ctx, tok, 20*time.Second); err != nil || !changed {
					t.Errorf("%s: WaitChange = %v, %v; want woken", what, changed, err)
				}
			}
			var task loop.Task
			wakes("a claim", func() (err error) {
				task, err = other.Claim(ctx, loop.ClaimParams{Agent: "agent-other", Mode: loop.ClaimLoop, Holder: loop.ThisProcess()})
				return err
			})
			if task.ID != "a" {
				t.Fatalf("claimed %q; want a", task.ID)
			}
			wakes("a completion", func() error {
				return other.Complete(ctx, loop.MoveParams{TaskID: "a", By: loop.Actor{Agent: "agent-other", Loop: true, Generation: task.Generation}})
			})
			tok, err := waiter.ChangeToken(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if changed, err := waiter.WaitChange(ctx, tok, 300*time.Millisecond); err != nil || changed {
				t.Errorf("nothing changed: WaitChange = %v, %v; want false", changed, err)
			}
			if ready, err := waiter.Ready(ctx, loop.Scope{}, 0); err != nil || len(ready) != 1 || ready[0].ID != "b" {
				t.Errorf("Ready = %v, %v; want b", ready, err)
			}

			view := waiter.ViewChanges()
			if _, err := view.ChangeToken(ctx); err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, direct)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var locks int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted OR locktype = 'advisory' AND classid = $1`, 0x52414c56).Scan(&locks); err != nil {
				t.Fatal(err)
			}
			if locks != 0 {
				t.Errorf("a viewer behind a pooler holds or waits for %d advisory locks", locks)
			}

			// The pooler's server connections, as another client gets them.
			raw, err := pgx.ParseConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			raw.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
			for range 5 {
				c, err := pgx.ConnectConfig(ctx, raw)
				if err != nil {
					t.Fatal(err)
				}
				var path, idle string
				err = c.QueryRow(ctx, `SELECT current_setting('search_path'), current_setting('idle_in_transaction_session_timeout')`).Scan(&path, &idle)
				c.Close(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if path != `"$user", public` || idle != "0" {
					t.Errorf("a server session left with search_path %s, idle_in_transaction_session_timeout %s", path, idle)
				}
			}
		})
	}
}

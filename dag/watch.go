package dag

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.ChangeWatcher = (*Store)(nil)

// watchEvery is how often WaitChange looks at the database's files.
const watchEvery = 50 * time.Millisecond

// ChangeToken implements loop.ChangeWatcher without a query: the size and
// modification time of the database file and of its write-ahead log, one
// of which every commit, by any process, changes.
func (s *Store) ChangeToken(ctx context.Context) (string, error) {
	if s.srv != nil {
		return s.srv.ChangeToken(ctx)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return s.fileState(), nil
}

func (s *Store) fileState() string {
	state := ""
	for _, p := range []string{s.path, s.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			state += fmt.Sprintf("%d.%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			state += "-;"
		}
	}
	return state
}

// WaitChange implements loop.ChangeWatcher: it looks at the files every
// watchEvery (two stat calls; the database itself is not read).
func (s *Store) WaitChange(ctx context.Context, token string, d time.Duration) (bool, error) {
	if s.srv != nil {
		return s.srv.WaitChange(ctx, token, d)
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	for {
		if s.fileState() != token {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-tick.C:
		}
	}
}

// ClaimsToken returns a token of the plan's claims: it changes when a
// claim is taken, ends, or is taken again (a new generation), and not when
// a lease is renewed. It reads the in_progress tasks only (an index of
// their own). A viewer of a plan on a server asks it, besides waiting for
// the ChangeWatcher's notifications: claims notify nobody there, since a
// NOTIFY would queue the claims' commits behind each other (DESIGN §10).
func (s *Store) ClaimsToken(ctx context.Context) (string, error) {
	var n, gen, at int64
	err := s.read(ctx, func(t *txn) error {
		rows, err := t.query(`SELECT count(*), CAST(coalesce(sum(generation), 0) AS BIGINT), CAST(coalesce(max(claimed_at), 0) AS BIGINT)
			FROM tasks INDEXED BY tasks_active WHERE status = 'in_progress'`)
		if err != nil {
			return err
		}
		defer rows.Close()
		if rows.Next() {
			if err := rows.Scan(&n, &gen, &at); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d.%d", n, gen, at), nil
}

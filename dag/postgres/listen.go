package postgres

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener keeps one connection LISTENing on the plan's channels (its
// schema's name, which the tables' triggers notify at every commit that
// can make a task ready or end a claim; for a viewer also the claims'
// channel, see viewerName) and counts what it hears. A
// change token is the count; a wait ends when the count moves. The
// connection is opened by the first token, so that commands that never
// wait never open it; a token is handed out only once the LISTEN is in
// place, so no change after it can be missed. A lost connection counts as
// a change (one may have been missed) and is opened again.
type listener struct {
	cc       *pgx.ConnConfig
	channels []string
	view     *[2]int32 // a viewer's advisory lock (see connect), or nil

	mu      sync.Mutex
	n       int64
	changed chan struct{} // closed and replaced at each change
	started bool
	ready   chan struct{} // closed when the first LISTEN is in place, or failed
	err     error         // why it failed
	stop    context.CancelFunc
	done    chan struct{}
}

func newListener(cc *pgx.ConnConfig, channels ...string) *listener {
	return &listener{cc: cc, channels: channels, changed: make(chan struct{})}
}

// token starts listening if need be and returns the count of changes.
func (l *listener) token(ctx context.Context) (string, error) {
	l.mu.Lock()
	if !l.started {
		l.started = true
		l.ready = make(chan struct{})
		l.done = make(chan struct{})
		lctx, cancel := context.WithCancel(context.Background())
		l.stop = cancel
		go l.run(lctx)
	}
	ready := l.ready
	l.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		err := l.err
		if l.ready == ready {
			l.started, l.err = false, nil // the next token tries again
		}
		return "", err
	}
	return strconv.FormatInt(l.n, 10), nil
}

// wait blocks until the count differs from token (true), d passes
// (false) or ctx ends.
func (l *listener) wait(ctx context.Context, token string, d time.Duration) (bool, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		l.mu.Lock()
		now, ch := strconv.FormatInt(l.n, 10), l.changed
		l.mu.Unlock()
		if now != token {
			return true, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// bump counts a change and wakes the waiters.
func (l *listener) bump() {
	l.mu.Lock()
	l.n++
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// run listens until ctx ends, connecting again with backoff when the
// connection is lost.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	first := true
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		cctx, cancel := context.WithCancel(ctx)
		conn, err := l.connect(cctx, cancel)
		if first {
			first = false
			l.mu.Lock()
			if err != nil {
				l.err = connectErr(l.cc, err)
			}
			close(l.ready)
			l.mu.Unlock()
			if err != nil {
				cancel()
				return
			}
		} else if err == nil {
			l.bump() // changes while it was away went unheard
			wait = 100 * time.Millisecond
		}
		if err != nil {
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
			continue
		}
		for {
			if _, err := conn.WaitForNotification(cctx); err != nil {
				break
			}
			l.bump()
		}
		cancel() // the viewer's second connection too
		conn.Close(context.Background())
		if ctx.Err() == nil {
			l.bump()
		}
	}
}

// connect opens the listening connection and LISTENs on the channels.
// A viewer's listener (view set) also opens a second connection that
// asks for the viewer's advisory lock on the plan and keeps it: while it
// waits for the lock or holds it, the claims' trigger cannot take the
// lock's shared form, and notifies (migration 0005). The first
// connection is handed out once that request is in place; cancel ends
// the second connection, and the second's loss cancels the first's wait.
func (l *listener) connect(ctx context.Context, cancel context.CancelFunc) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cc)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*pgx.Conn, error) {
		cancel()
		conn.Close(context.Background())
		return nil, err
	}
	for _, ch := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fail(err)
		}
	}
	if l.view == nil {
		return conn, nil
	}
	holder, err := pgx.ConnectConfig(ctx, l.cc)
	if err != nil {
		return fail(err)
	}
	pid := holder.PgConn().PID()
	go func() {
		defer holder.Close(context.Background())
		_, err := holder.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_lock(%d, %d)", l.view[0], l.view[1]))
		if err == nil {
			holder.WaitForNotification(ctx) // until it is lost, or ctx ends
		}
		cancel()
	}()
	// Wait until the server has the request, granted or queued.
	for {
		var asked bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
			AND pid = $1 AND classid = $2 AND objid = $3 AND objsubid = 2)`, pid, l.view[0], l.view[1]).Scan(&asked)
		if err != nil {
			return fail(err)
		}
		if asked {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (l *listener) close() {
	l.mu.Lock()
	started, stop, done := l.started, l.stop, l.done
	l.mu.Unlock()
	if started && stop != nil {
		stop()
		<-done
	}
}

package postgres

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener keeps one connection LISTENing on the plan's channel (its
// schema's name, which the tables' triggers notify at every commit that
// can make a task ready or end a claim) and counts what it hears. A
// change token is the count; a wait ends when the count moves. The
// connection is opened by the first token, so that commands that never
// wait never open it; a token is handed out only once the LISTEN is in
// place, so no change after it can be missed. A lost connection counts as
// a change (one may have been missed) and is opened again.
type listener struct {
	cc      *pgx.ConnConfig
	channel string

	mu      sync.Mutex
	n       int64
	changed chan struct{} // closed and replaced at each change
	started bool
	ready   chan struct{} // closed when the first LISTEN is in place, or failed
	err     error         // why it failed
	stop    context.CancelFunc
	done    chan struct{}
}

func newListener(cc *pgx.ConnConfig, channel string) *listener {
	return &listener{cc: cc, channel: channel, changed: make(chan struct{})}
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
		conn, err := pgx.ConnectConfig(ctx, l.cc)
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
				conn.Close(context.Background())
			}
		}
		if first {
			first = false
			l.mu.Lock()
			if err != nil {
				l.err = connectErr(l.cc, err)
			}
			close(l.ready)
			l.mu.Unlock()
			if err != nil {
				return
			}
		} else if err == nil {
			l.bump() // changes while it was away went unheard
			wait = 100 * time.Millisecond
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
			continue
		}
		for {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				break
			}
			l.bump()
		}
		conn.Close(context.Background())
		if ctx.Err() == nil {
			l.bump()
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

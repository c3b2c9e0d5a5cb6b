package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener keeps one connection LISTENing on the plan's channels (its
// schema's name, which the tables' triggers notify at commits that can
// make a task ready or end a claim; for a viewer also the claims'
// channel, see viewerName) and counts what it hears. The connection also
// holds the plan's waiting locks (presence): only while some process
// holds them do the plan's changes notify at all (migration 0013), since
// a NOTIFY makes the commits of the transactions that send it queue
// behind each other.
//
// A change token is the connection's run and the count; a wait ends when
// the count moves. A lost connection counts as a change (one may have
// been missed) and is opened again.
//
// A loop's listener is lazy: a token taken while nothing listens says so
// (absent), and costs nothing; a wait from it opens the connection, takes
// the locks and returns at once, a change maybe missed, so that the loop
// reads the plan again before it waits, heard. The connection is closed
// again once no wait has been under way for waitLinger, and the plan's
// changes stop notifying. A viewer's listener opens its connection at the
// first token and keeps it.
type listener struct {
	cc       *pgx.ConnConfig
	plan     int32
	channels []string
	view     *[2]int32 // a viewer's advisory lock (see connect), or nil
	lazy     bool

	mu      sync.Mutex
	n       int64
	changed chan struct{} // closed and replaced at each change
	cur     *listening    // the connection's run, or nil
	epochs  int64
	waits   int       // waits under way
	used    time.Time // when the last one ended
	closed  bool
	runs    sync.WaitGroup
}

// listening is one run of the listener's connection, from its open to
// its close.
type listening struct {
	epoch int64
	ready chan struct{} // closed when the first LISTEN is in place, or failed
	err   error         // why it failed
	stop  context.CancelFunc
}

// absent is the token taken while a lazy listener does not listen.
const absent = "-"

// waitLinger is how long a loop's listener keeps listening, and the
// plan's changes notifying, after its last wait or token: longer than a
// loop's look between its token and its wait, even a slow one.
const waitLinger = 5 * time.Second

// waitKey is the first key of the plan's first waiting lock ("RALW"; the
// others' are the next 31, the second key the plan's id): see migration
// 0013.
const waitKey = 0x52414c57

func newListener(cc *pgx.ConnConfig, plan int, channels ...string) *listener {
	return &listener{cc: cc, plan: int32(plan), channels: channels, changed: make(chan struct{})}
}

var errListenerClosed = errors.New("postgres: the store is closed")

// start begins a run of the connection; l.mu is held.
func (l *listener) start() *listening {
	l.epochs++
	ctx, cancel := context.WithCancel(context.Background())
	r := &listening{epoch: l.epochs, ready: make(chan struct{}), stop: cancel}
	l.cur, l.used = r, time.Now()
	l.runs.Add(2)
	go l.run(ctx, r)
	go l.idle(ctx, r)
	return r
}

// await waits for r's connection to listen: its first open's error, ctx's
// or nil. A run whose first open failed is forgotten, so that the next
// token or wait tries again.
func (l *listener) await(ctx context.Context, r *listening) error {
	select {
	case <-r.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.err == nil {
		return nil
	}
	l.mu.Lock()
	if l.cur == r {
		l.cur = nil
	}
	l.mu.Unlock()
	return r.err
}

func (r *listening) token(n int64) string {
	return strconv.FormatInt(r.epoch, 10) + ":" + strconv.FormatInt(n, 10)
}

// token returns the count of changes of the running connection, starting
// it if need be (a lazy listener's token starts nothing: absent).
func (l *listener) token(ctx context.Context) (string, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return "", errListenerClosed
	}
	r := l.cur
	if r == nil && l.lazy {
		l.mu.Unlock()
		return absent, nil
	}
	if r == nil {
		r = l.start()
	}
	l.mu.Unlock()
	if err := l.await(ctx, r); err != nil {
		if l.lazy && ctx.Err() == nil {
			return absent, nil // the wait tries again
		}
		return "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != r {
		return absent, nil // closed for idleness meanwhile
	}
	l.used = time.Now() // a wait may follow: keep listening
	return r.token(l.n), nil
}

// wait blocks until the count differs from token (true), d passes
// (false) or ctx ends. A token of another run than the one listening now,
// or absent, differs: the plan may have changed while nobody listened.
func (l *listener) wait(ctx context.Context, token string, d time.Duration) (bool, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false, errListenerClosed
	}
	r := l.cur
	if r == nil {
		r = l.start()
	}
	l.waits++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.waits--
		l.used = time.Now()
		l.mu.Unlock()
	}()
	// The connection may take a while (its locks wait for the commits of
	// changes under way): the wait's duration bounds that too.
	select {
	case <-r.ready:
	case <-timer.C:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if err := l.await(ctx, r); err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		// No connection to listen on: the wait is a timed one, after
		// which the plan may have changed.
		select {
		case <-timer.C:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	for {
		l.mu.Lock()
		now, ch, cur := l.n, l.changed, l.cur
		l.mu.Unlock()
		if cur != r || r.token(now) != token {
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

// idle ends a lazy listener's run r once no wait has been under way for
// waitLinger.
func (l *listener) idle(ctx context.Context, r *listening) {
	defer l.runs.Done()
	if !l.lazy {
		return
	}
	tick := time.NewTicker(waitLinger / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l.mu.Lock()
		quiet := l.cur == r && l.waits == 0 && time.Since(l.used) >= waitLinger
		if quiet {
			l.cur = nil
		}
		l.mu.Unlock()
		if quiet {
			r.stop()
			return
		}
	}
}

// run listens until ctx ends, connecting again with backoff when the
// connection is lost.
func (l *listener) run(ctx context.Context, r *listening) {
	defer l.runs.Done()
	first := true
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		cctx, cancel := context.WithCancel(ctx)
		conn, err := l.connect(cctx, cancel)
		if first {
			first = false
			if err != nil {
				r.err = connectErr(l.cc, err)
			}
			close(r.ready)
			if err != nil {
				cancel()
				r.stop()
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

// presenceSQL takes the shared form of the plan's 32 waiting locks
// (migration 0013), each once any change that holds its exclusive form
// has committed.
const presenceSQL = `SELECT count(pg_advisory_lock_shared($1 + s, $2)) FROM generate_series(0, 31) AS s`

// connect opens the listening connection, LISTENs on the channels and
// takes the plan's waiting locks: from then on every change notifies,
// and every change that did not has committed.
//
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
	if _, err := conn.Exec(ctx, presenceSQL, int32(waitKey), l.plan); err != nil {
		return fail(err)
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

// close ends the listening for good.
func (l *listener) close() {
	l.mu.Lock()
	r := l.cur
	l.cur, l.closed = nil, true
	l.mu.Unlock()
	if r != nil {
		r.stop()
	}
	l.runs.Wait()
}

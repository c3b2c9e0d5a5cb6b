package postgres

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultAnswerTimeout is Config.AnswerTimeout when zero: the longest the
// server may stay silent after ralph sent it something. ralph's
// statements are short (a claim, a completion, a page of a list); a bulk
// import streams, and each chunk the server acknowledges restarts the
// wait.
const DefaultAnswerTimeout = 30 * time.Second

// idleInTransaction is the server's idle_in_transaction_session_timeout
// for ralph's sessions: a machine cut off by the network in the middle of
// a write transaction, holding the plan's lock, loses its session (and
// the lock) after this long, rather than when the server's TCP keepalive
// gives up on it (two hours by default), so that the other machines go
// on. ralph's transactions never wait between their statements.
const idleInTransaction = time.Minute

// answerDialer is the DialFunc of the store's connections: each one
// fails a read once the server has been silent for timeout since ralph
// last wrote to it or last heard from it (answerConn).
func answerDialer(dial pgconn.DialFunc, timeout time.Duration) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &answerConn{Conn: c, timeout: timeout}, nil
	}
}

// answerConn is a connection to the server that counts it lost when the
// server stays silent for timeout while ralph waits for its answer: a
// network partition drops packets without a reset, and a read would
// otherwise wait for TCP to give up — a quarter of an hour or more —
// while the run stalls in silence. A read waits at most timeout after
// the last write or the last byte read, and at most until a deadline
// pgconn sets itself (its context's end), whichever is first.
type answerConn struct {
	net.Conn
	timeout time.Duration

	mu      sync.Mutex
	waiting time.Time // the answer's deadline; zero: none asked
	theirs  time.Time // pgconn's own read deadline; zero: none
}

func (c *answerConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.waiting = time.Now().Add(c.timeout)
	err := c.apply()
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func (c *answerConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if !c.waiting.IsZero() && !time.Now().Before(c.waiting) {
		// No read was under way when the answer's time ran out (it would
		// have failed): the answer came, and this read is pgx's own
		// look at an idle connection, under its own deadline.
		c.waiting = time.Time{}
		c.apply()
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		if !c.waiting.IsZero() {
			c.waiting = time.Now().Add(c.timeout)
			c.apply()
		}
		c.mu.Unlock()
	}
	if err != nil && isTimeout(err) {
		c.mu.Lock()
		now := time.Now()
		silent := !c.waiting.IsZero() && !now.Before(c.waiting) && (c.theirs.IsZero() || now.Before(c.theirs))
		c.mu.Unlock()
		if silent {
			return n, &silenceError{timeout: c.timeout, err: err}
		}
	}
	return n, err
}

func (c *answerConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.theirs = t
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.apply()
}

func (c *answerConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.theirs = t
	return c.apply()
}

// apply sets the read deadline: the earlier of the answer's and pgconn's.
func (c *answerConn) apply() error {
	d := c.theirs
	if !c.waiting.IsZero() && (d.IsZero() || c.waiting.Before(d)) {
		d = c.waiting
	}
	return c.Conn.SetReadDeadline(d)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// silenceError is the read error of a server silent for timeout: a
// net.Error whose Timeout is true, so that pgx counts the connection lost
// and the store connects again and retries (isConnectionTrouble).
type silenceError struct {
	timeout time.Duration
	err     error
}

func (e *silenceError) Error() string {
	return fmt.Sprintf("no answer from the server for %s (a network partition, or the server overloaded)", e.timeout)
}

func (e *silenceError) Unwrap() error   { return e.err }
func (e *silenceError) Timeout() bool   { return true }
func (e *silenceError) Temporary() bool { return true }

// withAnswerTimeout returns a copy of cc whose connections fail a read
// after timeout of the server's silence (answerConn) and whose sessions
// end a transaction left idle (idleInTransaction).
func withAnswerTimeout(cc *pgx.ConnConfig, timeout time.Duration) *pgx.ConnConfig {
	out := cc.Copy()
	dial := out.DialFunc
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 5 * time.Minute}).DialContext
	}
	out.DialFunc = answerDialer(dial, cmpOr(timeout, DefaultAnswerTimeout))
	if out.RuntimeParams == nil {
		out.RuntimeParams = map[string]string{}
	}
	if _, ok := out.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		out.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(idleInTransaction.Milliseconds())
	}
	return out
}

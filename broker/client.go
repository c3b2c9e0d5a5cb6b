package broker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// Client is one connection to a broker, from inside the agent's sandbox:
// the store methods the broker serves, with the semantics and errors of
// loop.TaskStore and its optional interfaces (errors.Is holds for the
// store's sentinels, errors.As for its *loop.TransitionError and
// *loop.HeldError and the broker's *RefusalError, Temporary for its temporary errors, and the message
// is the store's own). The requests of one Client go one after another
// on its connection; it is safe for concurrent use. A request cut off —
// a cancelled context, a broken connection, a callback's error in the
// middle of ListTasks — ends the connection: every later call returns
// that error.
type Client struct {
	mu   sync.Mutex
	conn *net.UnixConn
	r    *bufio.Reader
	err  error // why the connection can no longer be used
}

// Dial connects to the broker at path. When no broker answers there — no
// socket, connect(2) refused or not permitted (a sandbox that forbids
// it) — the error wraps ErrUnreachable.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, path, unwrapOp(err))
	}
	uc := c.(*net.UnixConn)
	return &Client{conn: uc, r: bufio.NewReaderSize(uc, 64<<10)}, nil
}

// unwrapOp drops net.OpError's "dial unix PATH:" prefix, which the
// message already says.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = errors.New("broker: client closed")
	}
	return c.conn.Close()
}

// call sends req and reads frames until the final one, giving each
// earlier frame to each (nil: none expected) and returning the final one.
// An error in the final frame comes back as a *remoteError.
func (c *Client) call(ctx context.Context, req request, each func(frame) error) (frame, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return frame{}, c.err
	}
	if err := ctx.Err(); err != nil {
		return frame{}, err
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	f, err := c.exchange(req, each)
	if !stop() || ctx.Err() != nil {
		// The deadline may have cut the exchange short: the connection
		// is no longer in step.
		c.broken(ctx.Err())
		return frame{}, ctx.Err()
	}
	var re *remoteError
	if err != nil && !errors.As(err, &re) {
		c.broken(err)
	}
	return f, err
}

func (c *Client) broken(err error) {
	if c.err == nil {
		c.err = err
		c.conn.Close()
	}
}

func (c *Client) exchange(req request, each func(frame) error) (frame, error) {
	if err := writeLine(c.conn, req); err != nil {
		// The broker may have refused the connection and closed it
		// before the request went out: its refusal is the answer.
		c.conn.SetReadDeadline(time.Now().Add(time.Second))
		if line, rerr := readLine(c.r, MaxFrame); rerr == nil {
			var f frame
			if json.Unmarshal(line, &f) == nil && f.Err != nil {
				return frame{}, &remoteError{w: *f.Err}
			}
		}
		return frame{}, fmt.Errorf("broker: send: %w", err)
	}
	for {
		line, err := readLine(c.r, MaxFrame)
		if err != nil {
			return frame{}, fmt.Errorf("broker: receive: %w", err)
		}
		var f frame
		if err := json.Unmarshal(line, &f); err != nil {
			return frame{}, fmt.Errorf("broker: receive: %w", err)
		}
		switch {
		case f.Err != nil:
			return frame{}, &remoteError{w: *f.Err}
		case f.End:
			return f, nil
		case each == nil:
			return frame{}, errors.New("broker: receive: an unexpected frame")
		}
		if err := each(f); err != nil {
			// The rest of the answer is still coming: the connection
			// cannot serve another request.
			c.broken(err)
			return frame{}, err
		}
	}
}

// Get is loop.TaskStore's.
func (c *Client) Get(ctx context.Context, id string) (loop.Task, error) {
	f, err := c.call(ctx, request{Op: opGet, ID: id}, nil)
	return task(f), err
}

// Logs is loop.TaskStore's.
func (c *Client) Logs(ctx context.Context, id string) ([]loop.LogEntry, error) {
	f, err := c.call(ctx, request{Op: opLogs, ID: id}, nil)
	return f.Logs, err
}

// Ready is loop.TaskStore's.
func (c *Client) Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error) {
	f, err := c.call(ctx, request{Op: opReady, Scope: scope, Limit: limit}, nil)
	return f.Tasks, err
}

// Active is loop.TaskStore's.
func (c *Client) Active(ctx context.Context, scope loop.Scope) ([]loop.Task, error) {
	f, err := c.call(ctx, request{Op: opActive, Scope: scope}, nil)
	return f.Tasks, err
}

// Counts is loop.TaskStore's.
func (c *Client) Counts(ctx context.Context, scope loop.Scope) (loop.Counts, error) {
	f, err := c.call(ctx, request{Op: opCounts, Scope: scope}, nil)
	if f.Counts == nil {
		return loop.Counts{}, err
	}
	return *f.Counts, err
}

// Claim is loop.TaskStore's, as the broker makes it: p.Agent must be the
// session's agent; the claim is held by the session's loop (p.Holder and
// p.Mode are the broker's); without a task id it takes from the run's
// scope (p.Scope is the broker's). Served in peek mode only.
func (c *Client) Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error) {
	f, err := c.call(ctx, request{Op: opClaim, Claim: &p}, nil)
	return task(f), err
}

// Complete is loop.TaskStore's; p.By must be the session's agent, without
// Force or Loop.
func (c *Client) Complete(ctx context.Context, p loop.MoveParams) error {
	_, err := c.call(ctx, request{Op: opComplete, Move: &p}, nil)
	return err
}

// Fail is loop.TaskStore's; p.By as for Complete.
func (c *Client) Fail(ctx context.Context, p loop.MoveParams) error {
	_, err := c.call(ctx, request{Op: opFail, Move: &p}, nil)
	return err
}

// Note is loop.TaskNoter's; p.By as for Complete.
func (c *Client) Note(ctx context.Context, p loop.MoveParams) error {
	_, err := c.call(ctx, request{Op: opNote, Move: &p}, nil)
	return err
}

// AddTask is loop.TaskAdder's.
func (c *Client) AddTask(ctx context.Context, t loop.NewTask) (loop.Task, error) {
	f, err := c.call(ctx, request{Op: opAdd, Task: &t}, nil)
	return task(f), err
}

// AddDependency is loop.TaskAdder's.
func (c *Client) AddDependency(ctx context.Context, blocked, blocker string) error {
	_, err := c.call(ctx, request{Op: opDepAdd, Blocked: blocked, Blocker: blocker}, nil)
	return err
}

// ListTasks is loop.TaskLister's: the tasks stream from the broker as the
// store reads them.
func (c *Client) ListTasks(ctx context.Context, q loop.ListQuery, fn func(loop.Task) error) error {
	req := request{Op: opList, List: &listQuery{Status: q.Status, Feature: q.Feature, Limit: q.Limit, Shape: q.Shape != nil}}
	_, err := c.call(ctx, req, func(f frame) error {
		switch {
		case f.Shape != nil && q.Shape != nil:
			return q.Shape(*f.Shape)
		case f.Task != nil:
			return fn(*f.Task)
		}
		return errors.New("broker: receive: an unexpected frame")
	})
	return err
}

func task(f frame) loop.Task {
	if f.Task == nil {
		return loop.Task{}
	}
	return *f.Task
}

var (
	_ loop.TaskAdder  = (*Client)(nil)
	_ loop.TaskLister = (*Client)(nil)
	_ loop.TaskNoter  = (*Client)(nil)
)

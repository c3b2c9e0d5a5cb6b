package forge

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// commentTimeout bounds one comment's request.
const commentTimeout = 30 * time.Second

// IssueComments is a loop.Observer that comments on the GitHub issue of
// a task imported from it (TaskID, and the issue imported as its caller
// knows: never an issue an agent named by adding a task gh-N) when a
// build claims the task (once a run), finishes it or fails it. The comments go out in order from a
// goroutine of their own, so that the loop never waits for GitHub; Close
// waits for the ones queued. A comment GitHub refuses is told to Warn and
// the build goes on. Whether an issue was imported is asked there too,
// off the loop's goroutine.
type IssueComments struct {
	client   *Client
	imported func(n int) bool
	warn     func(error)

	mu      sync.Mutex
	queue   []comment
	closed  bool
	claimed map[string]bool
	wake    chan struct{}
	done    chan struct{}
}

type comment struct {
	issue int
	body  string
}

// NewIssueComments returns the commenter on c's issues that imported
// says were imported; warn, if not nil, hears of each comment that could
// not be written.
func NewIssueComments(c *Client, imported func(n int) bool, warn func(error)) *IssueComments {
	ic := &IssueComments{client: c, imported: imported, warn: warn, claimed: map[string]bool{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go ic.run()
	return ic
}

// Observe implements loop.Observer.
func (ic *IssueComments) Observe(n loop.Note) {
	issue, ok := IssueNumber(n.Task.ID)
	if !ok || (n.Kind != loop.NoteIterationStart && n.Kind != loop.NoteIterationEnd) {
		return
	}
	where := fmt.Sprintf("iteration %d", n.Iteration)
	if n.Worker != "" {
		where += ", worker " + n.Worker
	}
	switch {
	case n.Kind == loop.NoteIterationStart:
		ic.mu.Lock()
		first := !ic.claimed[n.Task.ID]
		ic.claimed[n.Task.ID] = true
		ic.mu.Unlock()
		if first {
			ic.send(issue, fmt.Sprintf("ralph claimed this issue as task `%s` (%s).", n.Task.ID, where))
		}
	case n.Kind == loop.NoteIterationEnd && n.Status == loop.IterDone:
		ic.send(issue, fmt.Sprintf("ralph finished task `%s` (%s).", n.Task.ID, where))
	case n.Kind == loop.NoteIterationEnd && n.Status == loop.IterTaskFailed:
		why := strings.TrimSpace(n.Message)
		if len(why) > 1000 {
			why = why[:1000] + "…"
		}
		ic.send(issue, fmt.Sprintf("ralph failed task `%s` (%s): %s", n.Task.ID, where, why))
	}
}

// send queues a comment.
func (ic *IssueComments) send(issue int, body string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.closed {
		return
	}
	ic.queue = append(ic.queue, comment{issue, body})
	select {
	case ic.wake <- struct{}{}:
	default:
	}
}

// run writes the queue in order until Close.
func (ic *IssueComments) run() {
	defer close(ic.done)
	for {
		ic.mu.Lock()
		q, closed := ic.queue, ic.closed
		ic.queue = nil
		ic.mu.Unlock()
		for _, c := range q {
			if !ic.imported(c.issue) {
				continue // an id an agent chose: no issue of the plan's
			}
			ctx, cancel := context.WithTimeout(context.Background(), commentTimeout)
			err := ic.client.Comment(ctx, c.issue, c.body)
			cancel()
			if err != nil && ic.warn != nil {
				ic.warn(err)
			}
		}
		if closed && len(q) == 0 {
			return
		}
		if len(q) == 0 {
			<-ic.wake
		}
	}
}

// Close writes what is queued and stops, waiting at most until ctx ends
// (the rest is dropped then, and ctx's error returned).
func (ic *IssueComments) Close(ctx context.Context) error {
	ic.mu.Lock()
	ic.closed = true
	ic.mu.Unlock()
	select {
	case ic.wake <- struct{}{}:
	default:
	}
	select {
	case <-ic.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

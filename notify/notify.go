// Package notify tells people that a run ended, or needs them, while they
// are away (DESIGN §15, "Notifications"): each event is one JSON object,
// POSTed to an http:// or https:// target (a Slack-style incoming webhook
// shows its "text") or handed on standard input to any other target, a
// shell command (a desktop notice, mail).
//
// The events:
//
//   - run_end: the run ended, however it ended: outcome, exit_code,
//     counts and cost (sent by the caller, which knows the exit code:
//     Notifier.RunEnd).
//   - task_failed: a task went to failed (the agent said it failed, or it
//     ran out of retries); task names it.
//   - blocked: the run stopped because no task can start — every one left
//     waits for a failed or blocked task — just before its run_end.
//   - usage_limit_wait: the loop waits for an agent's usage limit to
//     reset; resets_at says until when.
//
// A Notifier is a loop.Observer: it turns the loop's notes into events
// and delivers them in order, on a goroutine of its own, so that a slow
// target never holds up the loop. A target that fails (a refused POST, a
// status other than 2xx, a command that exits non-zero, a timeout) is
// tried again a few times with a short backoff, then given up with a
// warning (Options.Warn); it never changes how the run ends. Close
// delivers what is queued, within a bound, before ralph exits.
//
// Targets come from the user — flags, $RALPH_NOTIFY, the project's
// configuration — never from anything an agent writes (DESIGN §13): a
// command target runs on the host, in a process group of its own that is
// killed when it times out. URLs are shown with their secrets masked
// (Mask).
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ralph-dev/ralph/loop"
)

// The events.
const (
	EventRunEnd         = "run_end"
	EventTaskFailed     = "task_failed"
	EventBlocked        = "blocked"
	EventUsageLimitWait = "usage_limit_wait"
)

// Event is one notification, as targets receive it (JSON).
type Event struct {
	Event string `json:"event"`
	// Text is one line a person reads.
	Text string `json:"text"`
	// Outcome is the run's outcome word (run_end, blocked), else "".
	Outcome string `json:"outcome"`
	// ExitCode is ralph's exit code (run_end), else null.
	ExitCode *int `json:"exit_code"`
	// Done, Failed and Remaining are the tasks of the run's scope at the
	// end of the run (run_end, blocked), else zero.
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Remaining int `json:"remaining"`
	// CostUSD is what the run's agent sessions cost so far.
	CostUSD float64 `json:"cost_usd"`
	// Task is the task the event is about (task_failed), else null.
	Task *Task `json:"task"`
	// ResetsAt is when the usage limit resets (usage_limit_wait).
	ResetsAt *time.Time `json:"resets_at,omitempty"`
	// Project is the project's directory; Plan the plan's name on a
	// database server, "" for the project's own SQLite plan.
	Project string `json:"project"`
	Plan    string `json:"plan"`
	// Kind is the kind of run: "build", "plan", "prompt".
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
}

// Task names a task in an event.
type Task struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Reason string `json:"reason,omitempty"`
}

// Options configure a Notifier.
type Options struct {
	// Project, Plan and Kind are copied into every event.
	Project, Plan, Kind string
	// Warn says a target's failure (nil: nothing is said).
	Warn func(format string, args ...any)
	// Commands runs command targets; nil means loop.HostCommands.
	Commands loop.CommandRunner
	// Client posts to URL targets; nil means a client of its own.
	Client *http.Client
	// Tries, Backoff and Timeout bound each delivery: how many tries,
	// the first wait between two (doubling), and how long one try may
	// take. Zero means 3, 500 ms and 10 s.
	Tries   int
	Backoff time.Duration
	Timeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Notifier delivers events to its targets. Its methods are safe for
// concurrent use; a nil *Notifier does nothing.
type Notifier struct {
	opts    Options
	targets []target

	mu     sync.Mutex
	queue  []Event
	wake   chan struct{}
	closed bool
	done   chan struct{}
	cost   float64
}

// target is where events go.
type target interface {
	deliver(ctx context.Context, body []byte) error
	String() string // masked
}

// New returns a Notifier for targets ("http(s)://…" or a shell command),
// or an error naming a target that is neither. With no targets it returns
// nil, which does nothing.
func New(targets []string, opts Options) (*Notifier, error) {
	if opts.Tries <= 0 {
		opts.Tries = 3
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 500 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Commands == nil {
		opts.Commands = loop.HostCommands
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	n := &Notifier{opts: opts, wake: make(chan struct{}, 1), done: make(chan struct{})}
	for _, raw := range targets {
		t, err := parseTarget(raw, n)
		if err != nil {
			return nil, err
		}
		if t != nil {
			n.targets = append(n.targets, t)
		}
	}
	if len(n.targets) == 0 {
		return nil, nil
	}
	go n.run()
	return n, nil
}

// parseTarget is the target raw names; nil for an empty one.
func parseTarget(raw string, n *Notifier) (target, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, nil
	}
	lower := strings.ToLower(raw)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("notify: %s is not a URL a POST can go to", Mask(raw))
		}
		return &webhook{url: raw, client: n.opts.Client}, nil
	}
	if strings.Contains(lower, "://") {
		return nil, fmt.Errorf("notify: %s: only http:// and https:// URLs are posted to; any other target is a shell command", Mask(raw))
	}
	return &command{cmd: raw, runner: n.opts.Commands}, nil
}

// Targets lists the targets, masked, for people.
func (n *Notifier) Targets() []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, t := range n.targets {
		out = append(out, t.String())
	}
	return out
}

// Observe implements loop.Observer: task_failed, usage_limit_wait and
// blocked from the loop's notes, and the cost so far from its receipts.
func (n *Notifier) Observe(note loop.Note) {
	if n == nil {
		return
	}
	switch {
	case note.Kind == loop.NoteReceipt && note.Receipt != nil:
		n.mu.Lock()
		n.cost += note.Receipt.CostUSD
		n.mu.Unlock()
	case note.Kind == loop.NoteIterationEnd && note.Status == loop.IterTaskFailed && note.Task.ID != "":
		n.send(Event{Event: EventTaskFailed, Task: &Task{ID: note.Task.ID, Title: note.Task.Title, Reason: note.Message},
			Text: fmt.Sprintf("ralph: task %s failed: %s", note.Task.ID, oneLine(note.Task.Title, 120))})
	case note.Kind == loop.NoteWait:
		at := note.Until
		n.send(Event{Event: EventUsageLimitWait, ResetsAt: &at,
			Text: fmt.Sprintf("ralph: usage limit reached; waiting until %s", at.Format(time.RFC3339))})
	}
}

// End is how a run ended, for RunEnd.
type End struct {
	Outcome  loop.Outcome
	ExitCode int
	// Message is the run's last line ("blocked: 1 task remains but none
	// is ready; failed: a (…)"), when there is one.
	Message                 string
	Done, Failed, Remaining int
	CostUSD                 float64
}

// RunEnd sends run_end for a run that ended as e (and blocked before it,
// when it ended blocked).
func (n *Notifier) RunEnd(e End) {
	if n == nil {
		return
	}
	code := e.ExitCode
	base := Event{Outcome: string(e.Outcome), Done: e.Done, Failed: e.Failed, Remaining: e.Remaining, CostUSD: e.CostUSD}
	if e.Outcome == loop.OutcomeBlocked {
		blocked := base
		blocked.Event = EventBlocked
		blocked.Text = "ralph: blocked: " + firstNonEmpty(oneLine(e.Message, 300), fmt.Sprintf("%d tasks remain but none is ready", e.Remaining))
		n.send(blocked)
	}
	end := base
	end.Event, end.ExitCode = EventRunEnd, &code
	end.Text = fmt.Sprintf("ralph %s in %s ended: %s (exit %d) · %d done, %d failed, %d remain · $%.2f",
		firstNonEmpty(n.opts.Kind, "run"), firstNonEmpty(n.opts.Project, "."), e.Outcome, code, e.Done, e.Failed, e.Remaining, e.CostUSD)
	if m := oneLine(e.Message, 300); m != "" && e.Outcome != loop.OutcomeBlocked {
		end.Text += " · " + m
	}
	n.send(end)
}

// send queues e, stamped, for every target.
func (n *Notifier) send(e Event) {
	e.Text = slackSafe.Replace(e.Text)
	e.Project, e.Plan, e.Kind, e.At = n.opts.Project, n.opts.Plan, n.opts.Kind, n.opts.Now().UTC()
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.Event != EventRunEnd {
		e.CostUSD = n.cost
	}
	if n.closed {
		return
	}
	n.queue = append(n.queue, e)
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run delivers the queue in order until Close.
func (n *Notifier) run() {
	defer close(n.done)
	for {
		n.mu.Lock()
		q, closed := n.queue, n.closed
		n.queue = nil
		n.mu.Unlock()
		for _, e := range q {
			n.deliver(e)
		}
		if closed && len(q) == 0 {
			return
		}
		if len(q) == 0 {
			<-n.wake
		}
	}
}

// deliver sends e to every target, trying each as Options say.
func (n *Notifier) deliver(e Event) {
	body, err := json.Marshal(e)
	if err != nil {
		n.warn("notify: %s: %v", e.Event, err)
		return
	}
	for _, t := range n.targets {
		wait := n.opts.Backoff
		var err error
		for try := 1; try <= n.opts.Tries; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), n.opts.Timeout)
			err = t.deliver(ctx, body)
			cancel()
			if err == nil {
				break
			}
			if try < n.opts.Tries {
				time.Sleep(wait)
				wait *= 2
			}
		}
		if err != nil {
			n.warn("notify: %s to %s failed after %d tries: %v", e.Event, t, n.opts.Tries, err)
		}
	}
}

func (n *Notifier) warn(format string, args ...any) {
	if n.opts.Warn != nil {
		n.opts.Warn(format, args...)
	}
}

// Close delivers what is queued and stops, waiting at most until ctx
// ends: ErrGaveUp then, with the events not delivered dropped.
func (n *Notifier) Close(ctx context.Context) error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	select {
	case <-n.done:
		return nil
	case <-ctx.Done():
		return ErrGaveUp
	}
}

// ErrGaveUp: Close ran out of time before every event was delivered.
var ErrGaveUp = errors.New("notify: gave up delivering the last notifications")

// webhook posts events to a URL.
type webhook struct {
	url    string
	client *http.Client
}

func (w *webhook) deliver(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return maskErr(err, w.url)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ralph")
	resp, err := w.client.Do(req)
	if err != nil {
		return maskErr(err, w.url)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", Mask(w.url), resp.Status)
	}
	return nil
}

func (w *webhook) String() string { return Mask(w.url) }

// maskErr is err with the URL's secrets masked: net/http quotes the URL
// (a *url.Error, whose own redaction keeps the query and the path).
func maskErr(err error, raw string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, Mask(raw), ue.Err)
	}
	return errors.New(strings.ReplaceAll(err.Error(), raw, Mask(raw)))
}

// command runs a shell command with the event on its standard input.
type command struct {
	cmd    string
	runner loop.CommandRunner
}

func (c *command) deliver(ctx context.Context, body []byte) error {
	out, err := c.runner.RunCommand(ctx, loop.CommandRequest{Command: c.cmd, Stdin: string(body)})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("timed out: %w", ctx.Err())
		}
		if s := oneLine(out, 200); s != "" {
			return fmt.Errorf("%v: %s", err, s)
		}
		return err
	}
	return nil
}

func (c *command) String() string { return fmt.Sprintf("command %q", c.cmd) }

// Mask returns a URL with its secrets replaced by "***": the password of
// its user info, the values of its query, and every path segment after
// the first (a Slack or Discord webhook's token lives there:
// hooks.slack.com/services/T…/B…/secret). A string that is no URL comes
// back as it is.
func Mask(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "***")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"***"}
		}
		u.RawQuery = q.Encode()
	}
	if segs := strings.Split(strings.Trim(u.Path, "/"), "/"); len(segs) > 1 {
		for i := 1; i < len(segs); i++ {
			segs[i] = "***"
		}
		u.Path = "/" + strings.Join(segs, "/")
		u.RawPath = ""
	}
	u.Fragment = ""
	s := u.String()
	// url.URL escapes the stars of a query value and of user info.
	return strings.NewReplacer("%2A%2A%2A", "***", "%2a%2a%2a", "***").Replace(s)
}

// oneLine folds s onto one line of at most n bytes (and an ellipsis).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// slackSafe is text with the three characters Slack-style webhooks read
// as markup escaped (&, <, >): a task title an agent wrote cannot ping a
// channel (<!channel>) or hide a link.
var slackSafe = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

package loop

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// EventLogName is the name of a session's event log in its raw-log
// directory.
const EventLogName = "events.jsonl"

// Limits on what an event log line keeps of an agent event: its text and
// its tool input are cut to these many bytes (on a UTF-8 boundary, ending
// in "…"). The raw stream keeps them whole.
const (
	EventTextLimit  = 1000
	EventInputLimit = 300
)

// EventLogPath is where a session's event log goes:
// <logDir>/<session>/events.jsonl, beside the raw streams.
func EventLogPath(logDir, session string) string {
	return filepath.Join(logDir, session, EventLogName)
}

// EventLine is one line of an event log: one Note, its fields named in
// snake_case and left out when empty. Times are UTC. It is what EventLog
// writes and what readers of the file (ralph serve) decode.
type EventLine struct {
	At        time.Time  `json:"at"`
	Kind      NoteKind   `json:"kind"`
	Session   string     `json:"session,omitempty"`
	Mode      string     `json:"mode,omitempty"`
	Worker    string     `json:"worker,omitempty"`
	Iteration int        `json:"iteration,omitempty"`
	Task      *EventTask `json:"task,omitempty"`
	Model     string     `json:"model,omitempty"`
	Status    string     `json:"status,omitempty"`
	// Phase is the step of a NotePhaseStart or NotePhaseEnd ("verify",
	// "gate", "integrate").
	Phase string `json:"phase,omitempty"`
	// Holder is the process writing the log (EventLog.Holder, as
	// Holder.String), on iteration_start lines.
	Holder  string        `json:"holder,omitempty"`
	Event   *EventDetail  `json:"event,omitempty"`
	Until   *time.Time    `json:"until,omitempty"`
	WaitMS  int64         `json:"wait_ms,omitempty"`
	Message string        `json:"message,omitempty"`
	Text    string        `json:"text,omitempty"`
	Held    []string      `json:"held,omitempty"`
	Receipt *EventReceipt `json:"receipt,omitempty"`
	Report  *EventReport  `json:"report,omitempty"`
}

// EventTask names a task in an event log line.
type EventTask struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
}

// EventDetail is an agent event in an event log line (NoteAgentEvent).
type EventDetail struct {
	Kind      EventKind `json:"kind"`
	Model     string    `json:"model,omitempty"`
	Subtype   string    `json:"subtype,omitempty"`
	Text      string    `json:"text,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Input     string    `json:"input,omitempty"`
	IsError   bool      `json:"is_error,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	// ResetsAt is a usage limit's reset (EventRateLimit).
	ResetsAt *time.Time `json:"resets_at,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// EventReceipt is a receipt in an event log line, with the names `ralph
// status --json` gives its fields.
type EventReceipt struct {
	Session          string  `json:"session"`
	Iteration        int     `json:"iteration"`
	Mode             string  `json:"mode"`
	TaskID           string  `json:"task_id"`
	Model            string  `json:"model"`
	Worker           string  `json:"worker"`
	Agent            string  `json:"agent"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	CostSource       string  `json:"cost_source"`
	StartedAt        string  `json:"started_at"`
	DurationSeconds  float64 `json:"duration_seconds"`
	Turns            int     `json:"turns"`
	ExitReason       string  `json:"exit_reason"`
	Verdict          string  `json:"verdict"`
	// Result is how the session's iteration ended (Receipt.Result), when
	// the store knows; the event log's receipts are written before.
	Result string `json:"result,omitempty"`
}

// EventReceiptOf is r as an event log line holds it, and as ralph serve
// sends it: CostSource "" (an agent that reports its cost) is
// CostReported.
func EventReceiptOf(r Receipt) EventReceipt {
	src := r.CostSource
	if src == "" {
		src = CostReported
	}
	er := EventReceipt{Session: r.Session, Iteration: r.Iteration, Mode: r.Mode, TaskID: r.TaskID, Model: r.Model,
		Worker: r.Worker, Agent: r.Agent, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CacheReadTokens: r.CacheReadTokens, CacheWriteTokens: r.CacheWriteTokens, CostUSD: r.CostUSD,
		CostSource: string(src), DurationSeconds: r.Duration.Seconds(), Turns: r.Turns,
		ExitReason: r.ExitReason, Verdict: r.Verdict, Result: string(r.Result)}
	if !r.StartedAt.IsZero() {
		er.StartedAt = r.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	return er
}

// EventReport is a run's report in an event log line (NoteSessionEnd).
type EventReport struct {
	Outcome    string  `json:"outcome"`
	ExitCode   int     `json:"exit_code"`
	Message    string  `json:"message,omitempty"`
	Iterations int     `json:"iterations"`
	Successes  int     `json:"successes"`
	Failures   int     `json:"failures"`
	CostUSD    float64 `json:"cost_usd"`
}

// EventLog is an Observer that writes a session's notes as JSON Lines
// (EventLine), the machine-readable twin of the session log: what `ralph
// serve` reads to show each worker's latest events. Every kind of note
// but transitions is written; agent text and tool input are cut (see
// EventTextLimit).
//
// Each line is written whole with one Write call, under a mutex, and not
// buffered, so a reader watching the file sees whole lines as they come.
// The workers of a parallel build share one EventLog, like the session
// log. Write errors never stop the run: the first is kept, nothing more is
// written, and Close returns it.
type EventLog struct {
	// Holder, if set, is the process whose run writes the log: it is
	// written on each iteration_start line, so that a reader can tell a
	// build that died (its holder gone) from one that is quiet.
	Holder Holder

	mu  sync.Mutex
	w   io.Writer
	c   io.Closer
	err error
}

// NewEventLog writes an event log to w.
func NewEventLog(w io.Writer) *EventLog { return &EventLog{w: w} }

// OpenEventLog opens the event log at path for appending, creating it and
// its directory if needed. An existing log must be a regular file with a
// single name: a link there is refused (package safefile), never written
// through. path's directory is trusted as named; Run opens its event log
// from the project root, so that no link on the way is followed either.
func OpenEventLog(path string) (*EventLog, error) {
	return openEventLog("", path)
}

// Observe writes the note's line.
func (l *EventLog) Observe(n Note) {
	if n.Kind == NoteTransition {
		return
	}
	e := eventLine(n)
	if n.Kind == NoteIterationStart && !l.Holder.IsZero() {
		e.Holder = l.Holder.String()
	}
	b, err := json.Marshal(e)
	if err != nil {
		// Every field is plain data: this cannot happen, but a note is
		// never worth a run.
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.w == nil {
		return
	}
	if _, err := l.w.Write(b); err != nil {
		l.err = fmt.Errorf("loop: event log: %w", err)
	}
}

// Err returns the first write error, if any.
func (l *EventLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Close closes the file OpenEventLog opened and returns the first error
// met.
func (l *EventLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		if err := l.c.Close(); err != nil && l.err == nil {
			l.err = fmt.Errorf("loop: event log: %w", err)
		}
		l.c = nil
	}
	l.w = nil
	return l.err
}

func eventTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func eventLine(n Note) EventLine {
	e := EventLine{At: n.At.UTC(), Kind: n.Kind, Session: n.Session, Mode: string(n.Mode), Worker: n.Worker,
		Iteration: n.Iteration, Model: n.Model, Status: string(n.Status), Phase: string(n.Phase),
		Message: n.Message, Text: cut(n.Text, EventTextLimit)}
	if n.Task.ID != "" {
		e.Task = &EventTask{ID: n.Task.ID, Title: n.Task.Title}
	}
	switch n.Kind {
	case NoteAgentEvent:
		ev := n.AgentEvent
		d := &EventDetail{Kind: ev.Kind, Model: ev.Model, Subtype: ev.Subtype, Text: cut(ev.Text, EventTextLimit),
			Tool: ev.Tool, Input: cut(ev.Input, EventInputLimit), IsError: ev.IsError, SessionID: ev.SessionID}
		if ev.UsageLimit != nil {
			d.ResetsAt = eventTime(ev.UsageLimit.ResetsAt)
			if d.Text == "" {
				d.Text = cut(ev.UsageLimit.Message, EventTextLimit)
			}
		}
		if ev.Err != nil {
			d.Error = cut(ev.Err.Error(), EventTextLimit)
		}
		e.Event = d
	case NoteWait:
		e.Until = eventTime(n.Until)
		e.WaitMS = n.Wait.Milliseconds()
	}
	for _, t := range n.Held {
		e.Held = append(e.Held, t.ID)
	}
	if r := n.Receipt; r != nil {
		er := EventReceiptOf(*r)
		e.Receipt = &er
	}
	if r := n.Report; r != nil {
		e.Report = &EventReport{Outcome: string(r.Outcome), ExitCode: r.Outcome.ExitCode(), Message: r.Message,
			Iterations: r.Iterations, Successes: r.Successes, Failures: r.Failures, CostUSD: r.CostUSD}
	}
	return e
}

// cut returns s cut to at most limit bytes on a UTF-8 boundary, ending in
// "…" when it was cut.
func cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const ell = "…"
	end := limit - len(ell)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + ell
}

// RawLogName is the name of a session's raw agent stream in its session's
// log directory: iter-<n>.ndjson, with the worker before it
// (w2-iter-3.ndjson), "-verify" for the verifier's session, and the agent
// CLI's name after it unless it is Claude Code (iter-3-verify-codex.ndjson).
func RawLogName(worker string, iteration int, verify bool, agent string) string {
	name := "iter-" + strconv.Itoa(iteration)
	if worker != "" {
		name = worker + "-" + name
	}
	if verify {
		name += "-verify"
	}
	if agent != "" && agent != "claude" {
		name += "-" + agent
	}
	return name + ".ndjson"
}

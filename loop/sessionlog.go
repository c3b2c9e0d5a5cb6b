package loop

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// SessionLogPath is where a session's log goes: <logDir>/<session>.log.
func SessionLogPath(logDir, session string) string {
	return filepath.Join(logDir, session+".log")
}

// SessionLog is an Observer that writes the session log: a
// session header, a header and a footer per iteration (mode, task, start;
// end, duration, model, cost, turns, status), the notices and waits in
// between, and a closing summary (iterations, successes, failures,
// duration, cost, outcome, exit reason, exit code). Agent events are not written;
// the raw stream of each session has them.
//
// The workers of a parallel build share one session log (Shared): every
// line of a worker's notes starts with its name in brackets ("[w2] "), and
// Observe may be called from several goroutines.
//
// Write errors are kept: the first one is returned by Close, and nothing is
// written after it.
type SessionLog struct {
	mu      sync.Mutex
	prefix  string // "[w2] " while a worker's note is written
	w       *bufio.Writer
	c       io.Closer
	err     error
	started bool
	iters   map[int]*iterLog
	// events is the session's event log (EventLog), opened with the
	// session log by Run and OpenSession: it gets every note the session
	// log gets, and is closed with it.
	events *EventLog
	// told makes the notice of an event log that could not be opened
	// come once, whichever worker sees it first.
	told sync.Once
}

type iterLog struct {
	start time.Time
	model string
	agent string
	cost  float64
	costs CostSource // estimated or unknown when any of the iteration's costs was
	turns int
}

// costText is a cost as the session log shows it: "$0.1200", with
// "(estimated)" when it is estimated from tokens, "unknown" when the agent
// reported none and no price was known.
func costText(usd float64, src CostSource) string {
	switch src {
	case CostEstimated:
		return fmt.Sprintf("$%.4f (estimated)", usd)
	case CostUnknown:
		if usd == 0 {
			return "unknown"
		}
		return fmt.Sprintf("$%.4f (and some unknown)", usd)
	}
	return fmt.Sprintf("$%.4f", usd)
}

// worse returns the less certain of two cost sources.
func worse(a, b CostSource) CostSource {
	rank := map[CostSource]int{"": 0, CostReported: 0, CostEstimated: 1, CostUnknown: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// NewSessionLog writes a session log to w.
func NewSessionLog(w io.Writer) *SessionLog {
	return &SessionLog{w: bufio.NewWriter(w), iters: map[int]*iterLog{}}
}

// OpenSessionLog creates the log file at path (and its directory),
// replacing a file of that name: what is there is removed first, a link
// removed and never written through. path's directory is trusted as
// named; Run opens its session log from the project root instead, so that
// no link on the way is followed either (package safefile).
func OpenSessionLog(path string) (*SessionLog, error) {
	return openSessionLog("", path)
}

const logTime = time.RFC3339

func (l *SessionLog) printf(format string, args ...any) {
	if l.err != nil {
		return
	}
	text := fmt.Sprintf(format, args...)
	if l.prefix != "" {
		var b strings.Builder
		for line := range strings.Lines(text) {
			if line != "\n" {
				b.WriteString(l.prefix)
			}
			b.WriteString(line)
		}
		text = b.String()
	}
	if _, err := l.w.WriteString(text); err != nil {
		l.err = err
	}
}

// Observe writes the note's lines.
func (l *SessionLog) Observe(n Note) {
	if l.events != nil {
		l.events.Observe(n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prefix = ""
	if !l.started {
		l.started = true
		l.printf("# ralph session %s\nstarted: %s\nmode: %s\n", n.Session, n.At.Format(logTime), n.Mode)
	}
	if n.Worker != "" {
		l.prefix = "[" + n.Worker + "] "
	}
	switch n.Kind {
	case NoteIterationStart:
		l.iters[n.Iteration] = &iterLog{start: n.At, model: n.Model}
		l.printf("\n=== iteration %d ===\nmode: %s\ntask: %s\nstart: %s\n", n.Iteration, n.Mode, taskLabel(n.Mode, n.Task), n.At.Format(logTime))
	case NoteReceipt:
		it := l.iter(n.Iteration, n.At)
		it.cost += n.Receipt.CostUSD
		it.costs = worse(it.costs, n.Receipt.CostSource)
		if n.Receipt.Mode != string(ModeVerify) {
			it.turns = n.Receipt.Turns
			if n.Receipt.Model != "" {
				it.model = n.Receipt.Model
			}
			it.agent = n.Receipt.Agent
		} else {
			agent := ""
			if n.Receipt.Agent != "" {
				agent = n.Receipt.Agent + ", "
			}
			l.printf("verifier: %s (%smodel %s, %s)\n", n.Receipt.Verdict, agent, n.Receipt.Model, costText(n.Receipt.CostUSD, n.Receipt.CostSource))
		}
	case NoteIterationEnd:
		it := l.iter(n.Iteration, n.At)
		l.printf("--- iteration %d end ---\nend: %s\nduration: %s\n", n.Iteration, n.At.Format(logTime), n.At.Sub(it.start).Round(time.Millisecond))
		if it.agent != "" {
			l.printf("agent: %s\n", it.agent)
		}
		l.printf("model: %s\ncost: %s\nturns: %d\nstatus: %s\n", it.model, costText(it.cost, it.costs), it.turns, n.Status)
		if n.Message != "" {
			l.printf("reason: %s\n", n.Message)
		}
		delete(l.iters, n.Iteration)
	case NoteWait:
		l.printf("[%s] wait %s until %s: %s\n", n.At.Format(logTime), n.Wait, n.Until.Format(logTime), n.Message)
	case NoteNotice:
		l.printf("[%s] %s\n", n.At.Format(logTime), n.Message)
		if n.Text != "" {
			l.printf("--- the agent's final text ---\n%s\n--- end of the agent's final text ---\n", strings.TrimRight(n.Text, "\n"))
		}
	case NoteSessionEnd:
		r := n.Report
		l.printf("\n=== session summary ===\niterations: %d\nsuccesses: %d\nfailures: %d\nduration: %s\ncost: $%.4f\noutcome: %s\nexit reason: %s\nexit code: %d\n",
			r.Iterations, r.Successes, r.Failures, r.Duration.Round(time.Millisecond), r.CostUSD, r.Outcome, r.Message, r.ExitCode())
	}
	if l.err == nil {
		l.err = l.w.Flush()
	}
}

func (l *SessionLog) iter(n int, at time.Time) *iterLog {
	it := l.iters[n]
	if it == nil {
		it = &iterLog{start: at}
		l.iters[n] = it
	}
	return it
}

func taskLabel(mode Mode, t Task) string {
	if t.ID == "" {
		if mode == ModePlan || mode == ModePrompt {
			return "(none: " + string(mode) + " mode)"
		}
		return "(claimed by the agent)"
	}
	return t.ID + " " + strings.Join(strings.Fields(t.Title), " ")
}

// Close flushes the log, closes the file it opened (and its event log)
// and returns the first error met.
func (l *SessionLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.events != nil {
		// l.events stays: Observe reads it without the lock, and a closed
		// EventLog writes nothing more.
		if err := l.events.Close(); err != nil && l.err == nil {
			l.err = err
		}
	}
	if l.err == nil {
		l.err = l.w.Flush()
	}
	if l.c != nil {
		if err := l.c.Close(); l.err == nil {
			l.err = err
		}
		l.c = nil
	}
	return l.err
}

package loop

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// NoteKind says what a Note reports.
type NoteKind string

// The kinds of Note the loop sends to its Observer.
const (
	NoteTransition     NoteKind = "transition"      // the machine moved: From, To, Event
	NoteIterationStart NoteKind = "iteration_start" // Iteration, Task (zero in peek mode), Model, Mode
	NoteIterationEnd   NoteKind = "iteration_end"   // Iteration, Task, Model, Status, Receipt
	NoteAgentEvent     NoteKind = "agent_event"     // AgentEvent, forwarded from the Runner
	NoteWait           NoteKind = "wait"            // a usage-limit wait: Until, Wait
	NoteWaitAgents     NoteKind = "wait_agents"     // nothing ready; waiting for the tasks other agents hold: Held, Message
	NoteReceipt        NoteKind = "receipt"         // Receipt of one agent session
	NoteNotice         NoteKind = "notice"          // Message for people (released claims, ignored COMPLETE, …)
	NoteSessionEnd     NoteKind = "session_end"     // Report, sent once, last
	NotePhaseStart     NoteKind = "phase_start"     // a phase of the iteration began: Phase, Task
	NotePhaseEnd       NoteKind = "phase_end"       // it ended: Phase, Task, Status and Message when it did not pass
)

// Phase names a step of a build iteration after the agent's session, which
// the loop reports with a NotePhaseStart and a NotePhaseEnd note.
//
// After a build agent's session that reported its task done, the steps
// that decide whether it is done are each reported so: PhaseVerify
// around the verifier (with Verify), PhaseGate around the test and commit
// gates (when either is on) and PhaseIntegrate around landing the work
// (with a Workspace). Observers that time steps (traces) need both ends;
// the end's Status is empty when the phase passed. The agent's own
// session is not a phase: its receipt (StartedAt, Duration) times it. A
// phase a step before it stopped is not reported at all.
type Phase string

// The phases of a build iteration, in the order they run.
const (
	PhaseVerify    Phase = "verify"    // the verifier's session (Config.Verify)
	PhaseGate      Phase = "gate"      // the test and commit gates (Config.TestCmd, Config.Commit)
	PhaseIntegrate Phase = "integrate" // landing the work on the integration branch (Config.Workspace)
)

// Note is one thing the loop reports to its Observer. Which fields are set
// depends on Kind.
type Note struct {
	Kind    NoteKind
	At      time.Time
	Session string
	Mode    Mode
	// Worker is the worker of a parallel build whose note it is ("w2");
	// empty without workers.
	Worker    string
	Iteration int

	From  State
	To    State
	Event StateEvent

	Task  Task
	Model string
	// Status is the iteration's status (NoteIterationEnd): see
	// IterationStatus.
	Status IterationStatus

	AgentEvent Event
	Until      time.Time
	Wait       time.Duration
	Receipt    *Receipt
	// Result is the session's own result on its NoteReceipt: what the
	// receipt summarises, with the agent's final text and its runner's
	// account of how it ended (a view's footer shows it).
	Result  *RunResult
	Message string
	Report  *Report
	// Held are the tasks other agents hold that the loop waits for
	// (NoteWaitAgents).
	Held []Task
	// Text is the agent's final text, when a notice is about an outcome
	// that could not be recorded: the session log keeps it whole.
	Text string
	// Unpriced is set on the notice, sent once a run with MaxCost, that a
	// session reported no cost and no price is known for its model, so
	// that MaxCost cannot count it: the session's receipt. A program that
	// sets MaxCost from its own option can word the notice with it.
	Unpriced *Receipt
	// AgentsTest is set on the notice at the start of a run that names
	// the test command taken from AGENTS.md (its Message is
	// AgentsTest.Announcement()).
	AgentsTest *AgentsTest
	// Phase is the phase a NotePhaseStart or NotePhaseEnd note is about.
	// On NotePhaseEnd, Status is empty when the phase passed, else the
	// status the iteration ends with because of it (IterVerifyFailed,
	// IterTestsFailed, IterIntegrationFailed, IterCancelled, …), and
	// Message says why.
	Phase Phase
	// Output is, on the notice that a command failed (the test gate, the
	// baseline, the final command), that command's output with its
	// lines, the end kept; on a notice that lists (the checks agents
	// wrote that a build will run), the list, one item a line. Message
	// holds it too, after its first line: a view prints it as lines, not
	// folded onto one.
	Output string
}

// Observer receives what a run does: transitions, iterations, agent events,
// waits, receipts, notices and the final report. The loop serialises its
// calls (never two at once), so implementations need no locking of their
// own, but calls may come from goroutines other than Run's caller.
//
// Observe should return quickly: it runs inline with the loop and, for
// agent events, with the stream reader. A panic in Observe is recovered:
// the run stops its agent, releases its claims and Run returns an
// *ObserverPanicError with OutcomeError.
type Observer interface {
	Observe(n Note)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(n Note)

// Observe calls f(n).
func (f ObserverFunc) Observe(n Note) { f(n) }

// MultiObserver sends every note to each observer in turn.
func MultiObserver(obs ...Observer) Observer {
	return ObserverFunc(func(n Note) {
		for _, o := range obs {
			if o != nil {
				o.Observe(n)
			}
		}
	})
}

// ObserverPanicError is returned by Run when its Observer panicked.
type ObserverPanicError struct {
	Value any
	Stack []byte
}

func (e *ObserverPanicError) Error() string {
	return fmt.Sprintf("loop: observer panicked: %v", e.Value)
}

// notifier serialises calls to the Observer and turns a panic into a
// recorded error and a cancellation of the run.
type notifier struct {
	mu sync.Mutex
	// log is the session log: it gets every note, even after obs panicked.
	log      *SessionLog
	obs      Observer
	panicked *ObserverPanicError
	cancel   func()
	base     Note // Session and Mode stamped on every note
	now      func() time.Time
}

func (n *notifier) send(note Note) {
	if n.obs == nil && n.log == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if note.At.IsZero() {
		note.At = n.now()
	}
	note.Session = n.base.Session
	note.Mode = n.base.Mode
	note.Worker = n.base.Worker
	if n.log != nil {
		n.log.Observe(note)
	}
	if n.obs == nil || n.panicked != nil {
		return // after a panic, the observer gets nothing more
	}
	defer func() {
		if v := recover(); v != nil {
			n.panicked = &ObserverPanicError{Value: v, Stack: debug.Stack()}
			if n.cancel != nil {
				n.cancel()
			}
		}
	}()
	n.obs.Observe(note)
}

func (n *notifier) err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.panicked == nil {
		return nil
	}
	return n.panicked
}

// phase sends the NotePhaseStart of phase p and returns the function that
// sends its NotePhaseEnd.
func (n *notifier) phase(iter int, p Phase, task Task) func(IterationStatus, string) {
	n.send(Note{Kind: NotePhaseStart, Iteration: iter, Phase: p, Task: task})
	return func(status IterationStatus, why string) {
		n.send(Note{Kind: NotePhaseEnd, Iteration: iter, Phase: p, Task: task, Status: status, Message: why})
	}
}

func (n *notifier) notice(iter int, format string, args ...any) {
	n.send(Note{Kind: NoteNotice, Iteration: iter, Message: fmt.Sprintf(format, args...)})
}

// failed is the notice of a command that failed: err's text as the
// Message, and what follows its first line (the command's output) as
// the Output.
func (n *notifier) failed(iter int, err error) {
	msg := err.Error()
	_, out, _ := strings.Cut(msg, "\n")
	n.send(Note{Kind: NoteNotice, Iteration: iter, Message: msg, Output: strings.TrimSpace(out)})
}

// list is a notice of a list: head, then items one a line, with the
// items as the Output, so that a view prints them as lines too.
func (n *notifier) list(iter int, head string, items []string) {
	body := strings.Join(items, "\n")
	n.send(Note{Kind: NoteNotice, Iteration: iter, Message: head + "\n" + body, Output: body})
}

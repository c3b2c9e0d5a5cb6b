package loop

import (
	"context"
	"fmt"

	"github.com/looplab/fsm"
)

// State is a state of the build loop's machine (States, StateEvents,
// Diagram): starting → running → iteration_complete → running …, ending
// in done (Complete, CompleteWithFailures, LimitReached:
// Outcome.Succeeded) or failed (every other outcome). Every transition is
// a NoteTransition. The goroutine calling Run owns the machine; events
// are fired with a context detached from cancellation (looplab/fsm wedges
// on a cancelled one) and the loop checks ctx itself between steps.
type State string

// The states of the build loop. A run starts in StateStarting and ends in
// StateDone or StateFailed.
const (
	StateStarting          State = "starting"
	StateRunning           State = "running"
	StateIterationComplete State = "iteration_complete"
	StateDone              State = "done"
	StateFailed            State = "failed"
)

// States lists every state of the machine, in lifecycle order.
func States() []State {
	return []State{StateStarting, StateRunning, StateIterationComplete, StateDone, StateFailed}
}

// StateEvent names a move of the machine.
type StateEvent string

// The events of the build loop's machine.
const (
	// StateEventStart: the run's checks passed; the first iteration begins.
	StateEventStart StateEvent = "start"
	// StateEventIterate: an iteration ran its agent and handled the outcome.
	StateEventIterate StateEvent = "iterate"
	// StateEventNext: the exit checks found more to do; the next iteration begins.
	StateEventNext StateEvent = "next"
	// StateEventFinish: the run ended with an outcome that Outcome.Succeeded
	// reports (Complete, CompleteWithFailures, LimitReached).
	StateEventFinish StateEvent = "finish"
	// StateEventAbort: the run ended with any other outcome.
	StateEventAbort StateEvent = "abort"
)

// StateEvents lists every event of the machine.
func StateEvents() []StateEvent {
	return []StateEvent{StateEventStart, StateEventIterate, StateEventNext, StateEventFinish, StateEventAbort}
}

func machineEvents() fsm.Events {
	live := []string{string(StateStarting), string(StateRunning), string(StateIterationComplete)}
	return fsm.Events{
		{Name: string(StateEventStart), Src: []string{string(StateStarting)}, Dst: string(StateRunning)},
		{Name: string(StateEventIterate), Src: []string{string(StateRunning)}, Dst: string(StateIterationComplete)},
		{Name: string(StateEventNext), Src: []string{string(StateIterationComplete)}, Dst: string(StateRunning)},
		{Name: string(StateEventFinish), Src: live, Dst: string(StateDone)},
		{Name: string(StateEventAbort), Src: live, Dst: string(StateFailed)},
	}
}

// Diagram returns the build loop's state machine as a Mermaid state
// diagram. The output is stable: it is kept as a golden file in testdata.
func Diagram() string {
	f := fsm.NewFSM(string(StateStarting), machineEvents(), nil)
	s, err := fsm.VisualizeWithType(f, fsm.MERMAID)
	if err != nil {
		// Only an unknown visualisation type fails, and MERMAID is known.
		panic(fmt.Sprintf("loop: diagram: %v", err))
	}
	return s
}

// machine wraps the fsm. It is owned by the goroutine running the loop and
// never shared: looplab/fsm's concurrent Event calls race.
type machine struct {
	f *fsm.FSM
}

func newMachine() *machine {
	return &machine{f: fsm.NewFSM(string(StateStarting), machineEvents(), nil)}
}

func (m *machine) state() State { return State(m.f.Current()) }

// fire moves the machine and returns the states before and after. The
// context is detached from cancellation: a cancelled context would leave
// looplab/fsm stuck in transition for good (upstream issue 115); the loop
// watches cancellation itself.
func (m *machine) fire(ctx context.Context, ev StateEvent) (from, to State, err error) {
	from = m.state()
	if err := m.f.Event(context.WithoutCancel(ctx), string(ev)); err != nil {
		return from, from, fmt.Errorf("loop: state machine: %w", err)
	}
	return from, m.state(), nil
}

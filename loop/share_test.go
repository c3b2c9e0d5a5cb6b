package loop_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// Several loops on one plan (ARCHITECTURE.md §3.1): a loop
// that finds nothing ready while other loops hold tasks waits for them
// instead of stopping as blocked, and takes the work their completions make
// ready. Every loop ends complete; every task is worked exactly once.
func TestLoopsSharePlan(t *testing.T) {
	// Two chains and a fan-in: at most two tasks are ready at a time, so
	// the third and fourth loop keep finding nothing ready.
	plan := []loop.Task{
		{ID: "a1"}, {ID: "a2", BlockedBy: []string{"a1"}}, {ID: "a3", BlockedBy: []string{"a2"}},
		{ID: "b1"}, {ID: "b2", BlockedBy: []string{"b1"}},
		{ID: "end", BlockedBy: []string{"a3", "b2"}},
	}
	store := newStore(t, plan...)
	var mu sync.Mutex
	runs := map[string]int{}
	runner := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		mu.Lock()
		runs[id]++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return looptest.Result(done(id)), nil
	})
	const loops = 4
	reps := make([]loop.Report, loops)
	errs := make([]error, loops)
	waits := make([]*recorder, loops)
	var wg sync.WaitGroup
	for i := range loops {
		cfg := testConfig(t)
		cfg.AgentID = fmt.Sprintf("agent-0000000%d", i)
		waits[i] = &recorder{}
		cfg.Observer = waits[i]
		wg.Go(func() { reps[i], errs[i] = loop.Run(t.Context(), cfg, store, runner) })
	}
	wg.Wait()
	for i := range loops {
		if errs[i] != nil || reps[i].Outcome != loop.OutcomeComplete || reps[i].ExitCode() != 0 {
			t.Errorf("loop %d: %s (%q), err %v; want complete, exit 0", i, reps[i].Outcome, reps[i].Message, errs[i])
		}
	}
	want := map[string]int{"a1": 1, "a2": 1, "a3": 1, "b1": 1, "b2": 1, "end": 1}
	if diff := cmp.Diff(want, runs); diff != "" {
		t.Errorf("sessions per task (-want +got):\n%s", diff)
	}
	// Somebody waited, and said for what.
	var said []string
	for _, w := range waits {
		for _, n := range w.kind(loop.NoteWaitAgents) {
			said = append(said, n.Message)
			if len(n.Held) == 0 {
				t.Errorf("a wait note without the held tasks: %+v", n)
			}
		}
	}
	if len(said) == 0 || !strings.Contains(said[0], "held by other agents") {
		t.Errorf("wait notes %q, want at least one naming the held tasks", said)
	}
}

// A loop waiting for a claim whose holder stopped renewing it takes the
// task once the lease runs out.
func TestWaitEndsWithLease(t *testing.T) {
	store := newStore(t, tasks("a")...)
	if _, err := store.Claim(t.Context(), loop.ClaimParams{TaskID: "a", Agent: "agent-stuck", Lease: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	rec := &recorder{}
	cfg.Observer = rec
	runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
	start := time.Now()
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s (%q), err %v; want complete", rep.Outcome, rep.Message, err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("done after %v: the loop did not wait for the lease", waited)
	}
	notes := rec.kind(loop.NoteWaitAgents)
	if len(notes) != 1 || !strings.Contains(notes[0].Message, "a (agent-stuck, lease only)") {
		t.Errorf("wait notes %+v, want one naming a and its holder", notes)
	}
}

// Cancelling a waiting loop ends it at once as cancelled, holding nothing.
func TestWaitCancelled(t *testing.T) {
	store := newStore(t, tasks("a")...)
	if _, err := store.Claim(t.Context(), loop.ClaimParams{TaskID: "a", Agent: "agent-other"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cfg := testConfig(t)
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		if n.Kind == loop.NoteWaitAgents {
			cancel()
		}
	})
	rep, err := loop.Run(ctx, cfg, store, looptest.NewFakeRunner(t))
	if err != nil || rep.Outcome != loop.OutcomeCancelled || rep.ExitCode() != 130 {
		t.Errorf("outcome %s, err %v; want cancelled (130)", rep.Outcome, err)
	}
	if a, _ := store.Get(t.Context(), "a"); a.ClaimedBy != "agent-other" {
		t.Errorf("the other agent's claim: held by %q", a.ClaimedBy)
	}
}

// readyAfterLook is a store on which another agent completes its claim
// just after a look for a ready task (Ready) first finds none: between
// that look and the loop's count of the plan, a task becomes ready.
type readyAfterLook struct {
	*looptest.MemStore
	once   sync.Once
	finish func()
}

func (s *readyAfterLook) Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error) {
	ts, err := s.MemStore.Ready(ctx, scope, limit)
	if err == nil && len(ts) == 0 {
		s.once.Do(s.finish)
	}
	return ts, err
}

// A task another agent's completion makes ready after the loop found none
// ready, and before it counted the plan (nothing in progress any more),
// is not a blocked plan: the loop takes it. Seen with 8 processes on one
// SQLite plan, where a loop exited 6 with the last task ready.
func TestReadyBetweenLookAndCount(t *testing.T) {
	mem := newStore(t, loop.Task{ID: "a"}, loop.Task{ID: "b", BlockedBy: []string{"a"}})
	held, err := mem.Claim(t.Context(), loop.ClaimParams{TaskID: "a", Agent: "agent-other"})
	if err != nil {
		t.Fatal(err)
	}
	store := &readyAfterLook{MemStore: mem, finish: func() {
		by := loop.Actor{Agent: "agent-other", Generation: held.Generation}
		if err := mem.Complete(context.Background(), loop.MoveParams{TaskID: "a", By: by}); err != nil {
			t.Error(err)
		}
	}}
	rep, err := loop.Run(t.Context(), testConfig(t), store, looptest.NewFakeRunner(t).Always(agent(done, "")))
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s (%q), err %v; want complete", rep.Outcome, rep.Message, err)
	}
	if b, _ := mem.Get(t.Context(), "b"); b.Status != loop.StatusDone {
		t.Errorf("b is %s, want done", b.Status)
	}
}

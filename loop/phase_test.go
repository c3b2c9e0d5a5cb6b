package loop_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// phaseNote is the part of a note the phase tests compare.
type phaseNote struct {
	Kind      loop.NoteKind
	Iteration int
	Phase     loop.Phase
	Task      string
	Status    loop.IterationStatus
	Message   string
}

// phaseNotes records the iteration and phase notes of a run.
func phaseNotes(cfg *loop.Config) func() []phaseNote {
	var mu sync.Mutex
	var got []phaseNote
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		switch n.Kind {
		case loop.NoteIterationStart, loop.NoteIterationEnd, loop.NotePhaseStart, loop.NotePhaseEnd:
			mu.Lock()
			got = append(got, phaseNote{Kind: n.Kind, Iteration: n.Iteration, Phase: n.Phase, Task: n.Task.ID, Status: n.Status, Message: n.Message})
			mu.Unlock()
		}
	})
	return func() []phaseNote {
		mu.Lock()
		defer mu.Unlock()
		return append([]phaseNote(nil), got...)
	}
}

// fakeWorkspace lands every attempt, or fails to with err.
type fakeWorkspace struct {
	dir string
	err error
}

func (w *fakeWorkspace) Dir() string { return w.dir }

func (w *fakeWorkspace) Begin(context.Context, loop.Task, int) (bool, error) { return false, nil }

func (w *fakeWorkspace) Integrate(ctx context.Context, req loop.IntegrateRequest) (loop.IntegrateResult, error) {
	if w.err != nil {
		return loop.IntegrateResult{}, w.err
	}
	return loop.IntegrateResult{Commit: "0123456789abcdef"}, nil
}

func TestPhaseNotes(t *testing.T) {
	const (
		start, end       = loop.NoteIterationStart, loop.NoteIterationEnd
		pStart, pEnd     = loop.NotePhaseStart, loop.NotePhaseEnd
		verify, gate, in = loop.PhaseVerify, loop.PhaseGate, loop.PhaseIntegrate
	)
	tests := []struct {
		name    string
		config  func(t *testing.T, cfg *loop.Config)
		verdict string
		want    []phaseNote
	}{
		{
			name:   "no verifier, no gate, no workspace: no phases",
			config: func(t *testing.T, cfg *loop.Config) {},
			want: []phaseNote{
				{Kind: start, Iteration: 1, Task: "a"},
				{Kind: end, Iteration: 1, Task: "a", Status: loop.IterDone},
			},
		},
		{
			name: "verifier passes, test gate passes",
			config: func(t *testing.T, cfg *loop.Config) {
				gitRepo(t, cfg.Root)
				cfg.Verify = true
				cfg.TestCmd = "true"
			},
			verdict: "<verify-pass/>",
			want: []phaseNote{
				// Cheap first: the gate, then the verifier.
				{Kind: start, Iteration: 1, Task: "a"},
				{Kind: pStart, Iteration: 1, Phase: gate, Task: "a"},
				{Kind: pEnd, Iteration: 1, Phase: gate, Task: "a"},
				{Kind: pStart, Iteration: 1, Phase: verify, Task: "a"},
				{Kind: pEnd, Iteration: 1, Phase: verify, Task: "a"},
				{Kind: end, Iteration: 1, Task: "a", Status: loop.IterDone},
			},
		},
		{
			name: "verifier fails after the gate passed",
			config: func(t *testing.T, cfg *loop.Config) {
				gitRepo(t, cfg.Root)
				cfg.Verify = true
				cfg.TestCmd = "true"
			},
			verdict: "<verify-fail>no tests</verify-fail>",
			want: []phaseNote{
				{Kind: start, Iteration: 1, Task: "a"},
				{Kind: pStart, Iteration: 1, Phase: gate, Task: "a"},
				{Kind: pEnd, Iteration: 1, Phase: gate, Task: "a"},
				{Kind: pStart, Iteration: 1, Phase: verify, Task: "a"},
				{Kind: pEnd, Iteration: 1, Phase: verify, Task: "a", Status: loop.IterVerifyFailed, Message: "no tests"},
				{Kind: end, Iteration: 1, Task: "a", Status: loop.IterVerifyFailed, Message: "verification failed: no tests"},
			},
		},
		{
			name: "test gate fails",
			// It passes on the starting tree (the baseline), then fails.
			config: func(t *testing.T, cfg *loop.Config) { cfg.TestCmd = "[ ! -e b ] && touch b || exit 3" },
			want: []phaseNote{
				{Kind: start, Iteration: 1, Task: "a"},
				{Kind: pStart, Iteration: 1, Phase: gate, Task: "a"},
				{Kind: pEnd, Iteration: 1, Phase: gate, Task: "a", Status: loop.IterTestsFailed, Message: "loop: test gate failed: [ ! -e b ] && touch b || exit 3: exit status 3"},
				{Kind: end, Iteration: 1, Task: "a", Status: loop.IterTestsFailed, Message: "loop: test gate failed: [ ! -e b ] && touch b || exit 3: exit status 3"},
			},
		},
		{
			name: "work lands",
			config: func(t *testing.T, cfg *loop.Config) {
				cfg.Workspace = &fakeWorkspace{dir: cfg.Root}
			},
			want: []phaseNote{
				{Kind: start, Iteration: 1, Task: "a"},
				{Kind: pStart, Iteration: 1, Phase: in, Task: "a"},
				{Kind: pEnd, Iteration: 1, Phase: in, Task: "a"},
				{Kind: end, Iteration: 1, Task: "a", Status: loop.IterDone},
			},
		},
		{
			name: "work cannot land",
			config: func(t *testing.T, cfg *loop.Config) {
				cfg.Workspace = &fakeWorkspace{dir: cfg.Root, err: &loop.IntegrationError{Reason: "conflict in a.go"}}
			},
			want: []phaseNote{
				{Kind: start, Iteration: 1, Task: "a"},
				{Kind: pStart, Iteration: 1, Phase: in, Task: "a"},
				{Kind: pEnd, Iteration: 1, Phase: in, Task: "a", Status: loop.IterIntegrationFailed, Message: "integration: conflict in a.go"},
				{Kind: end, Iteration: 1, Task: "a", Status: loop.IterIntegrationFailed, Message: "integration: conflict in a.go"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, loop.Task{ID: "a"})
			cfg := testConfig(t)
			cfg.MaxIterations = 1
			tt.config(t, &cfg)
			notes := phaseNotes(&cfg)
			runner := looptest.NewFakeRunner(t).Always(agent(done, tt.verdict))
			if _, err := loop.Run(context.Background(), cfg, store, runner); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, notes()); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

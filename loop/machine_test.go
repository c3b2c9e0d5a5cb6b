package loop_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestDiagram(t *testing.T) {
	golden(t, "diagram.mmd", loop.Diagram())
}

func TestStatesAndEvents(t *testing.T) {
	if diff := cmp.Diff([]loop.State{"starting", "running", "iteration_complete", "done", "failed"}, loop.States()); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]loop.StateEvent{"start", "iterate", "next", "finish", "abort"}, loop.StateEvents()); diff != "" {
		t.Error(diff)
	}
}

// The Observer sees every transition, in order, ending in done or failed.
func TestTransitionsObserved(t *testing.T) {
	type move struct {
		From, To loop.State
		Event    loop.StateEvent
	}
	tests := []struct {
		name  string
		tasks []loop.Task
		runs  int
		want  []move
	}{
		{name: "two iterations then complete", tasks: tasks("a", "b"), want: []move{
			{"starting", "running", "start"},
			{"running", "iteration_complete", "iterate"}, {"iteration_complete", "running", "next"},
			{"running", "iteration_complete", "iterate"},
			{"iteration_complete", "done", "finish"},
		}},
		{name: "no plan fails from running", want: []move{
			{"starting", "running", "start"},
			{"running", "failed", "abort"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tt.tasks...)
			cfg := testConfig(t)
			rec := &recorder{}
			cfg.Observer = rec
			runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
			if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
				t.Fatal(err)
			}
			var got []move
			for _, n := range rec.kind(loop.NoteTransition) {
				got = append(got, move{n.From, n.To, n.Event})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("transitions (-want +got):\n%s", diff)
			}
			ends := rec.kind(loop.NoteSessionEnd)
			if len(ends) != 1 || rec.notes[len(rec.notes)-1].Kind != loop.NoteSessionEnd {
				t.Errorf("session end note missing or not last")
			}
		})
	}
}

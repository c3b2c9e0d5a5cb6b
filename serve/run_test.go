package serve

import (
	"testing"

	"github.com/ralph-dev/ralph/loop"
)

// A worker's card names the step after the agent's session it is in, from
// the phase notes of its event log, and forgets it when the step or the
// iteration ends.
func TestApplyPhase(t *testing.T) {
	w := &workerJSON{Worker: "w1"}
	task := &loop.EventTask{ID: "a", Title: "Add login"}
	for i, step := range []struct {
		line loop.EventLine
		want string
	}{
		{loop.EventLine{Kind: loop.NoteIterationStart, Task: task}, ""},
		{loop.EventLine{Kind: loop.NotePhaseStart, Task: task, Phase: "verify"}, "verify"},
		{loop.EventLine{Kind: loop.NotePhaseEnd, Task: task, Phase: "verify"}, ""},
		{loop.EventLine{Kind: loop.NotePhaseStart, Task: task, Phase: "gate"}, "gate"},
		{loop.EventLine{Kind: loop.NoteAgentEvent, Event: &loop.EventDetail{Kind: loop.EventText, Text: "tests run"}}, "gate"},
		{loop.EventLine{Kind: loop.NotePhaseEnd, Task: task, Phase: "gate"}, ""},
		{loop.EventLine{Kind: loop.NotePhaseStart, Task: task, Phase: "integrate"}, "integrate"},
		{loop.EventLine{Kind: loop.NoteIterationEnd, Task: task}, ""},
		{loop.EventLine{Kind: loop.NotePhaseStart, Task: task, Phase: "gate"}, "gate"},
		{loop.EventLine{Kind: loop.NoteSessionEnd}, ""},
	} {
		apply(w, step.line)
		if w.Phase != step.want {
			t.Errorf("after line %d (%s %s): phase %q, want %q", i, step.line.Kind, step.line.Phase, w.Phase, step.want)
		}
	}
}

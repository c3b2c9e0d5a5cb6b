package serve

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// An event log longer than a read's chunk is read whole, a line at a
// time; a line not yet ended waits for its end.
func TestSessionUpdateChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := loop.OpenEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	l.Observe(loop.Note{Kind: loop.NoteIterationStart, At: at, Worker: "w1", Iteration: 1, Task: loop.Task{ID: "a"}})
	text := strings.Repeat("x", 400)
	n := 2*readChunk/len(text) + 7
	for i := range n {
		l.Observe(loop.Note{Kind: loop.NoteAgentEvent, At: at, Worker: "w1", Iteration: 1,
			AgentEvent: loop.Event{Kind: loop.EventText, Text: fmt.Sprintf("%d %s", i, text)}})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() <= 2*readChunk {
		t.Fatalf("the log has %d bytes, want more than two chunks", fi.Size())
	}
	se := &session{name: "s"}
	changed, err := se.update(filepath.Dir(path), path)
	if err != nil || len(changed) != 1 || changed[0] != "w1" {
		t.Fatalf("update = %v, %v; want w1 changed", changed, err)
	}
	w := se.workers["w1"]
	if len(w.Events) != maxEvents || !strings.HasPrefix(w.Events[maxEvents-1].Text, fmt.Sprintf("%d ", n-1)) || w.Task == nil || w.Task.ID != "a" {
		t.Fatalf("w1 after the read: task %v, %d events, the last %.20q", w.Task, len(w.Events), w.Events[len(w.Events)-1].Text)
	}

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(`{"at":"2026-11-24T08:00:01Z","kind":"iteration_end","worker":"w1"`)
	if changed, err := se.update(filepath.Dir(path), path); err != nil || len(changed) != 0 {
		t.Errorf("update with half a line = %v, %v; want nothing yet", changed, err)
	}
	f.WriteString("}\n")
	if changed, err := se.update(filepath.Dir(path), path); err != nil || len(changed) != 1 || se.workers["w1"].Task != nil {
		t.Errorf("update with the line ended = %v, %v, task %v; want w1 between tasks", changed, err, se.workers["w1"].Task)
	}
}

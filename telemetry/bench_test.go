package telemetry_test

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/telemetry"
)

// iterationNotes are the notes of one build iteration with a verifier and
// a test gate: 16 notes, 10 of them agent events.
func iterationNotes(n int) []loop.Note {
	task := loop.Task{ID: "t-1", Title: "Write the parser"}
	at := t0.Add(time.Duration(n) * time.Minute)
	rc := &loop.Receipt{Iteration: n, Mode: "build", TaskID: task.ID, Model: "claude-sonnet-4-5", InputTokens: 1000, OutputTokens: 100,
		CostUSD: 0.25, StartedAt: at, Duration: time.Second, Turns: 3, ExitReason: "success", Agent: "claude"}
	vrc := *rc
	vrc.Mode, vrc.Verdict = "verify", "pass"
	notes := []loop.Note{{Kind: loop.NoteIterationStart, Iteration: n, Task: task, Model: "sonnet"}}
	for i := range 10 {
		kind := loop.EventText
		if i%2 == 0 {
			kind = loop.EventToolUse
		}
		notes = append(notes, loop.Note{Kind: loop.NoteAgentEvent, Iteration: n, AgentEvent: loop.Event{Kind: kind, Tool: "Bash"}})
	}
	notes = append(notes,
		loop.Note{Kind: loop.NoteReceipt, Iteration: n, Receipt: rc},
		loop.Note{Kind: loop.NotePhaseStart, Iteration: n, Phase: loop.PhaseVerify, Task: task},
		loop.Note{Kind: loop.NoteReceipt, Iteration: n, Receipt: &vrc},
		loop.Note{Kind: loop.NotePhaseEnd, Iteration: n, Phase: loop.PhaseVerify, Task: task},
		loop.Note{Kind: loop.NoteIterationEnd, Iteration: n, Task: task, Status: loop.IterDone},
	)
	for i := range notes {
		notes[i].At, notes[i].Session, notes[i].Mode = at, "session-bench", loop.ModeBuild
	}
	return notes
}

// benchObserver sends iterations of notes to an Observer on tp and reports
// the cost per note.
func benchObserver(b *testing.B, tp trace.TracerProvider, each func()) {
	obs := telemetry.NewObserver(tp, 0)
	notes := iterationNotes(1)
	b.ReportAllocs()
	iters := 0
	for b.Loop() {
		for _, n := range notes {
			obs.Observe(n)
		}
		iters++
		if each != nil && iters%1000 == 0 {
			each()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iters*len(notes)), "ns/note")
}

// BenchmarkObserverNoop is the cost of the Observer when traces are off
// (Setup without a configuration): OpenTelemetry's no-op tracer.
func BenchmarkObserverNoop(b *testing.B) {
	benchObserver(b, noop.NewTracerProvider(), nil)
}

// BenchmarkObserverSDK is its cost with the SDK: a batch span processor in
// front of an in-memory exporter (emptied every 1,000 iterations).
func BenchmarkObserverSDK(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	b.Cleanup(func() { tp.Shutdown(b.Context()) })
	benchObserver(b, tp, exp.Reset)
}

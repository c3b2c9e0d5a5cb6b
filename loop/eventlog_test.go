package loop_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// readEvents decodes an event log, failing on any line that is not whole
// JSON.
func readEvents(t *testing.T, path string) []loop.EventLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []loop.EventLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e loop.EventLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d: %v: %s", len(lines)+1, err, sc.Text())
		}
		lines = append(lines, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestEventLogSingleRun(t *testing.T) {
	clock := looptest.NewClock(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
	store := looptest.NewMemStore(clock.Now)
	if err := store.Add(loop.Task{ID: "a", Title: "Add login", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Now = clock.Now
	cfg.Session = ""
	cfg.SessionLog = true
	cfg.RawLogs = true
	long := strings.Repeat("é", 800) // 1,600 bytes
	res := looptest.Result(done("a"))
	res.Model, res.CostUSD, res.Turns = "claude-sonnet-4-5", 0.25, 4
	runner := looptest.NewFakeRunner(t).ThenStep(looptest.Step{
		Events: []loop.Event{
			{Kind: loop.EventToolUse, Tool: "Bash", Input: "go test " + strings.Repeat("x", 400)},
			{Kind: loop.EventText, Text: long},
		},
		Result: res,
	})
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	lines := readEvents(t, loop.EventLogPath(filepath.Join(cfg.Root, ".ralph", "logs"), rep.Session))
	want := []string{"iteration_start", "agent_event/tool_use", "agent_event/text", "receipt", "iteration_end", "session_end"}
	if diff := cmp.Diff(want, eventKinds(t, lines, rep.Session)); diff != "" {
		t.Fatalf("kinds (-want +got):\n%s", diff)
	}
	if got := lines[0].Task; got == nil || *got != (loop.EventTask{ID: "a", Title: "Add login"}) {
		t.Errorf("iteration_start task = %+v", got)
	}
	checkEventHolder(t, cfg, lines)
	checkEventLimits(t, lines[1].Event, lines[2].Event)
	r := lines[3].Receipt
	if r == nil || r.TaskID != "a" || r.CostUSD != 0.25 || r.Turns != 4 || r.Model != "claude-sonnet-4-5" {
		t.Errorf("receipt = %+v", r)
	}
	if rp := lines[5].Report; rp == nil || rp.Outcome != string(loop.OutcomeComplete) || rp.Iterations != 1 {
		t.Errorf("report = %+v", rp)
	}
}

// eventKinds is the kind of each line ("agent_event/text" for an agent's
// event), checking that every line carries a UTC time and session.
func eventKinds(t *testing.T, lines []loop.EventLine, session string) []string {
	t.Helper()
	var kinds []string
	for _, l := range lines {
		k := string(l.Kind)
		if l.Event != nil {
			k += "/" + string(l.Event.Kind)
		}
		kinds = append(kinds, k)
		if l.At.Location() != time.UTC || l.At.IsZero() {
			t.Errorf("%s: at %v, want a UTC time", k, l.At)
		}
		if l.Session != session {
			t.Errorf("%s: session %q, want %q", k, l.Session, session)
		}
	}
	return kinds
}

// checkEventHolder checks that the first line, an iteration_start, names
// the build's process, so that a reader can tell a dead build from a quiet
// one, and that the agent event after it does not repeat it.
func checkEventHolder(t *testing.T, cfg loop.Config, lines []loop.EventLine) {
	t.Helper()
	holder := cfg.Holder
	if holder.IsZero() {
		holder = loop.ThisProcess()
	}
	if got := lines[0].Holder; got != holder.String() {
		t.Errorf("iteration_start holder = %q, want %q", got, holder.String())
	}
	if got := lines[1].Holder; got != "" {
		t.Errorf("agent_event holder = %q, want it only on iteration_start", got)
	}
}

// checkEventLimits checks that a long tool input and a long text were cut
// to EventInputLimit and EventTextLimit bytes, on a rune boundary, ending
// in "…".
func checkEventLimits(t *testing.T, tool, text *loop.EventDetail) {
	t.Helper()
	in := tool.Input
	if len(in) > loop.EventInputLimit || !strings.HasPrefix(in, "go test xxx") || !strings.HasSuffix(in, "…") {
		t.Errorf("tool input %d bytes %q, want at most %d ending in …", len(in), in, loop.EventInputLimit)
	}
	txt := text.Text
	if len(txt) > loop.EventTextLimit || !utf8.ValidString(txt) || !strings.HasSuffix(txt, "…") {
		t.Errorf("text %d bytes (valid UTF-8: %v), want at most %d ending in …", len(txt), utf8.ValidString(txt), loop.EventTextLimit)
	}
}

// The workers of a parallel build write one event log, each line naming
// its worker.
func TestEventLogSharedWorkers(t *testing.T) {
	store := newStore(t, loop.Task{ID: "a"}, loop.Task{ID: "b"})
	base := testConfig(t)
	base.SessionLog = true
	base.Session = "session-shared"
	session, slog, err := loop.OpenSession(base)
	if err != nil {
		t.Fatal(err)
	}
	shared := loop.NewShared(slog)
	// Each session waits until both workers hold a task, so that each
	// worker runs exactly one.
	var started sync.WaitGroup
	started.Add(2)
	runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		started.Done()
		started.Wait()
		var id string
		for _, kv := range req.Env {
			if v, ok := strings.CutPrefix(kv, "RALPH_TASK_ID="); ok {
				id = v
			}
		}
		req.OnEvent(loop.Event{Kind: loop.EventText, Text: "working on " + id})
		return looptest.Result(done(id)), nil
	})
	var wg sync.WaitGroup
	for _, w := range []string{"w1", "w2"} {
		cfg := base
		cfg.Session = session
		cfg.Worker = w
		cfg.AgentID = testAgent + "-" + w
		cfg.Shared = shared
		wg.Go(func() {
			if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := slog.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readEvents(t, loop.EventLogPath(filepath.Join(base.Root, ".ralph", "logs"), session))
	texts := map[string]int{}
	for _, l := range lines {
		if l.Kind == loop.NoteAgentEvent {
			texts[l.Worker+": "+l.Event.Text]++
		}
	}
	if len(texts) != 2 || texts["w1: working on a"]+texts["w1: working on b"] != 1 || texts["w2: working on a"]+texts["w2: working on b"] != 1 {
		t.Errorf("agent events by worker = %v, want one from each worker", texts)
	}
	ends := 0
	for _, l := range lines {
		if l.Kind == loop.NoteSessionEnd {
			ends++
		}
	}
	if ends != 2 {
		t.Errorf("%d session_end lines, want one per worker", ends)
	}
}

type countingFailWriter struct{ n int }

func (w *countingFailWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

// A write error is kept and stops the writing, nothing more.
func TestEventLogWriteError(t *testing.T) {
	w := &countingFailWriter{}
	l := loop.NewEventLog(w)
	l.Observe(loop.Note{Kind: loop.NoteNotice, Message: "one"})
	l.Observe(loop.Note{Kind: loop.NoteNotice, Message: "two"})
	if err := l.Err(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Err() = %v, want the write error", err)
	}
	if w.n != 1 {
		t.Errorf("%d writes, want 1: nothing is written after an error", w.n)
	}
	if err := l.Close(); err == nil {
		t.Error("Close returned nil after a write error")
	}
}

// An event log that cannot be written (here /dev/full) does not stop the
// run, and the session log is still written.
func TestEventLogWriteErrorDoesNotStopRun(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	store := newStore(t, loop.Task{ID: "a"})
	cfg := testConfig(t)
	cfg.SessionLog = true
	logDir := filepath.Join(cfg.Root, ".ralph", "logs")
	if err := os.MkdirAll(filepath.Join(logDir, cfg.Session), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/full", loop.EventLogPath(logDir, cfg.Session)); err != nil {
		t.Fatal(err)
	}
	runner := looptest.NewFakeRunner(t, looptest.Result(done("a")))
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v; want complete", rep.Outcome, err)
	}
	data, err := os.ReadFile(loop.SessionLogPath(logDir, cfg.Session))
	if err != nil || !strings.Contains(string(data), "outcome: complete") {
		t.Errorf("session log %q, %v", data, err)
	}
}

// An event log whose place is taken by a directory cannot be opened; the
// run goes on.
func TestEventLogOpenErrorDoesNotStopRun(t *testing.T) {
	store := newStore(t, loop.Task{ID: "a"})
	cfg := testConfig(t)
	cfg.SessionLog = true
	if err := os.MkdirAll(loop.EventLogPath(filepath.Join(cfg.Root, ".ralph", "logs"), cfg.Session), 0o755); err != nil {
		t.Fatal(err)
	}
	runner := looptest.NewFakeRunner(t, looptest.Result(done("a")))
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v; want complete", rep.Outcome, err)
	}
}

// The steps after an agent's session (NotePhaseStart, NotePhaseEnd) are
// recorded with their phase, and a phase that did not pass with why.
func TestEventLogPhases(t *testing.T) {
	path := loop.EventLogPath(t.TempDir(), "s")
	l, err := loop.OpenEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	task := loop.Task{ID: "a", Title: "Add login"}
	l.Observe(loop.Note{Kind: loop.NotePhaseStart, At: at, Session: "s", Worker: "w1", Iteration: 2, Phase: loop.PhaseGate, Task: task})
	l.Observe(loop.Note{Kind: loop.NotePhaseEnd, At: at, Session: "s", Worker: "w1", Iteration: 2, Phase: loop.PhaseGate, Task: task,
		Status: loop.IterTestsFailed, Message: "go test ./... failed"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := readEvents(t, path)
	et := &loop.EventTask{ID: "a", Title: "Add login"}
	want := []loop.EventLine{
		{At: at, Kind: loop.NotePhaseStart, Session: "s", Worker: "w1", Iteration: 2, Task: et, Phase: "gate"},
		{At: at, Kind: loop.NotePhaseEnd, Session: "s", Worker: "w1", Iteration: 2, Task: et, Phase: "gate",
			Status: string(loop.IterTestsFailed), Message: "go test ./... failed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestRawLogName(t *testing.T) {
	for _, tc := range []struct {
		worker string
		n      int
		verify bool
		agent  string
		want   string
	}{
		{"", 3, false, "", "iter-3.ndjson"},
		{"", 3, false, "claude", "iter-3.ndjson"},
		{"", 3, true, "claude", "iter-3-verify.ndjson"},
		{"w2", 3, false, "codex", "w2-iter-3-codex.ndjson"},
		{"w2", 3, true, "gemini", "w2-iter-3-verify-gemini.ndjson"},
	} {
		if got := loop.RawLogName(tc.worker, tc.n, tc.verify, tc.agent); got != tc.want {
			t.Errorf("RawLogName(%q, %d, %v, %q) = %q, want %q", tc.worker, tc.n, tc.verify, tc.agent, got, tc.want)
		}
	}
}

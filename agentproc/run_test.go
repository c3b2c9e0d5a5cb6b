package agentproc

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/loop"
)

// decodeLines is the test agents' protocol: each line of output is an
// EventText, and the line "result" an EventResult.
func decodeLines(r io.Reader, emit func(loop.Event)) error {
	lines := NewLineReader(r)
	for {
		line, err := lines.ReadLine()
		if err != nil {
			return err
		}
		text := strings.TrimRight(string(line), "\n")
		if text == "result" {
			emit(loop.Event{Kind: loop.EventResult, Text: text})
			continue
		}
		emit(loop.Event{Kind: loop.EventText, Text: text})
	}
}

// events gathers events from OnEvent.
type events struct {
	mu  sync.Mutex
	all []loop.Event
}

func (e *events) add(ev loop.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

// texts returns the texts of the events of kind k.
func (e *events) texts(k loop.EventKind) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.all {
		if ev.Kind == k {
			out = append(out, ev.Text)
		}
	}
	return out
}

// shSpec returns a Spec that runs the shell script script in a
// directory of its own, decoded by decodeLines into evs.
func shSpec(t *testing.T, script string, evs *events) Spec {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	return Spec{
		Name:    "test-agent",
		Path:    sh,
		Args:    []string{"-c", script},
		Dir:     t.TempDir(),
		Env:     os.Environ(),
		LogPath: filepath.Join(t.TempDir(), "logs", "raw.log"),
		Grace:   500 * time.Millisecond,
		Decode:  decodeLines,
		OnEvent: evs.add,
	}
}

func TestRun(t *testing.T) {
	var evs events
	s := shSpec(t, `read line; echo "got $line"; echo "a complaint" >&2; echo "marker ${`+EnvRun+`:+set}"; echo result; exit 3`, &evs)
	s.Stdin = "hello\n"
	exit, err := Run(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"got hello", "marker set"}, evs.texts(loop.EventText)); diff != "" {
		t.Errorf("texts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a complaint"}, evs.texts(loop.EventStderr)); diff != "" {
		t.Errorf("stderr lines (-want +got):\n%s", diff)
	}
	want := Exit{ExitCode: 3, AfterResult: true, Stderr: "a complaint"}
	if diff := cmp.Diff(want, exit, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Duration" }, cmp.Ignore())); diff != "" {
		t.Errorf("Exit (-want +got):\n%s", diff)
	}
	raw, err := os.ReadFile(s.LogPath)
	if err != nil || string(raw) != "got hello\nmarker set\nresult\n" {
		t.Errorf("raw log %q, %v", raw, err)
	}
}

func TestRunStops(t *testing.T) {
	const margin = 3 * time.Second
	tests := []struct {
		name   string
		script string
		edit   func(*Spec)
		cancel bool // cancel on the first event
		want   StopReason
		after  bool
		max    time.Duration
	}{
		{name: "wall timeout", script: `echo working; sleep 60`, edit: func(s *Spec) { s.Timeout = 500 * time.Millisecond }, want: StopTimeout, max: 500*time.Millisecond + margin},
		{name: "idle timeout", script: `echo working; sleep 60`, edit: func(s *Spec) { s.IdleTimeout = 300 * time.Millisecond }, want: StopIdle, max: 300*time.Millisecond + margin},
		{name: "cancel", script: `echo working; sleep 60`, cancel: true, want: StopCancel, max: margin},
		{name: "result, then no exit", script: `echo result; sleep 60`, edit: func(s *Spec) { s.ResultGrace, s.IdleTimeout = 300*time.Millisecond, time.Minute }, want: StopResultGrace, after: true, max: 300*time.Millisecond + margin},
		{name: "SIGTERM ignored: SIGKILL after the grace", script: `trap '' TERM; echo working; sleep 60`, edit: func(s *Spec) { s.Timeout = 300 * time.Millisecond }, want: StopTimeout, max: 300*time.Millisecond + 500*time.Millisecond + margin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var evs events
			s := shSpec(t, tt.script, &evs)
			if tt.edit != nil {
				tt.edit(&s)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancel {
				var once sync.Once
				s.OnEvent = func(ev loop.Event) { evs.add(ev); once.Do(cancel) }
			}
			start := time.Now()
			exit, err := Run(ctx, s)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if exit.Stop != tt.want || exit.AfterResult != tt.after || exit.Cancelled != tt.cancel {
				t.Errorf("Stop %v, AfterResult %v, Cancelled %v; want %v, %v, %v", exit.Stop, exit.AfterResult, exit.Cancelled, tt.want, tt.after, tt.cancel)
			}
			if exit.ExitCode != -1 {
				t.Errorf("exit code %d, want -1 (killed by a signal)", exit.ExitCode)
			}
			if tt.want == StopResultGrace && !strings.Contains(exit.Stderr, "did not exit within") {
				t.Errorf("Stderr %q does not say the agent was stopped after its result", exit.Stderr)
			}
			if elapsed > tt.max {
				t.Errorf("Run took %v, want at most %v", elapsed, tt.max)
			}
		})
	}
}

func TestRunNotStarted(t *testing.T) {
	var evs events
	t.Run("missing executable", func(t *testing.T) {
		s := shSpec(t, "", &evs)
		s.Path = filepath.Join(t.TempDir(), "no-such-agent")
		if _, err := Run(t.Context(), s); !errors.Is(err, loop.ErrAgentNotFound) {
			t.Errorf("err = %v, want ErrAgentNotFound", err)
		}
	})
	t.Run("missing working directory is not a missing agent", func(t *testing.T) {
		s := shSpec(t, "", &evs)
		s.Dir = filepath.Join(s.Dir, "nope")
		_, err := Run(t.Context(), s)
		if err == nil || errors.Is(err, loop.ErrAgentNotFound) || !strings.Contains(err.Error(), "working directory") {
			t.Errorf("err = %v, want a working directory error", err)
		}
	})
	t.Run("log file under a file", func(t *testing.T) {
		s := shSpec(t, "", &evs)
		blocker := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(blocker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		s.LogPath = filepath.Join(blocker, "raw.log")
		if _, err := Run(t.Context(), s); err == nil || !strings.Contains(err.Error(), "log file") {
			t.Errorf("err = %v, want a log file error", err)
		}
	})
	t.Run("context already cancelled", func(t *testing.T) {
		s := shSpec(t, "touch started", &evs)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		exit, err := Run(ctx, s)
		if diff := cmp.Diff(Exit{Cancelled: true, ExitCode: -1}, exit); err != nil || diff != "" {
			t.Errorf("err %v, Exit (-want +got):\n%s", err, diff)
		}
		if _, err := os.Stat(filepath.Join(s.Dir, "started")); err == nil {
			t.Error("the agent ran")
		}
	})
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "codex")
	other := filepath.Join(dir, "other")
	for _, p := range []string{exe, other} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	bin := Bin{Name: "codex", EnvVar: "RALPH_CODEX", Install: "install it"}
	const hint = "; install it or name the executable in $RALPH_CODEX"
	tests := []struct {
		name, flag, env string
		path            string // PATH
		want, wantErr   string
		// wantMissing is the error's Missing("--agent-bin"): the
		// caller's path under the caller's name.
		wantMissing string
	}{
		{name: "flag wins", flag: other, env: "/nowhere", path: dir, want: other},
		{name: "env next", env: other, path: dir, want: other},
		{name: "PATH last", path: dir, want: exe},
		{name: "flag missing", flag: "/nowhere/codex", path: dir, wantErr: `path "/nowhere/codex" is not an executable`,
			wantMissing: `--agent-bin "/nowhere/codex" is not an executable (stat /nowhere/codex: no such file or directory)`},
		{name: "env missing", env: "/nowhere/codex", path: dir, wantErr: `$RALPH_CODEX "/nowhere/codex" is not an executable`,
			wantMissing: `$RALPH_CODEX "/nowhere/codex" is not an executable (stat /nowhere/codex: no such file or directory)`},
		{name: "nothing on PATH", path: t.TempDir(), wantErr: "loop: agent executable not found: no codex on PATH" + hint,
			wantMissing: "no codex on PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			got, err := bin.LookPath(tt.flag, tt.env)
			if tt.wantErr != "" {
				if !errors.Is(err, loop.ErrAgentNotFound) || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasSuffix(err.Error(), hint) {
					t.Fatalf("err = %v, want ErrAgentNotFound saying %q and ending with the hint", err, tt.wantErr)
				}
				var nf *NotFoundError
				if !errors.As(err, &nf) || nf.Bin != bin {
					t.Fatalf("err = %#v, want a *NotFoundError of %v", err, bin)
				}
				if got := nf.Missing("--agent-bin"); got != tt.wantMissing {
					t.Errorf("Missing(--agent-bin) = %q, want %q", got, tt.wantMissing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEnviron(t *testing.T) {
	got := Environ(
		[]string{"A=1", "SECRET=x", "B=2", "junk", "=empty"},
		[]string{"B=3", "C=4", "SECRET=y", "A=5"},
		func(k string) bool { return k == "SECRET" },
	)
	if diff := cmp.Diff([]string{"A=5", "B=3", "C=4"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Lines of any length come whole, the last one without its newline too.
func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 5<<20) // past the 4 MiB kept on the heap
	in := "short\n" + strings.Repeat("y", 100<<10) + "\n" + long + "\nlast"
	lines := NewLineReader(strings.NewReader(in))
	var got []string
	for {
		line, err := lines.ReadLine()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(line))
		if lines.Huge() != (len(line) > 4<<20) {
			t.Errorf("line of %d bytes: Huge() = %v", len(line), lines.Huge())
		}
	}
	want := []string{"short\n", strings.Repeat("y", 100<<10) + "\n", long + "\n", "last"}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %d bytes, want %d", i, len(got[i]), len(want[i]))
		}
	}
}

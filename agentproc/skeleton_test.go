package agentproc

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// TestExitEnding: the one mapping from how Run ended to a runner's Ending,
// case by case, and the class Stopped gives each.
func TestExitEnding(t *testing.T) {
	good, bad := &loop.RunResult{}, &loop.RunResult{IsError: true}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name      string
		x         Exit
		cancelled bool
		result    *loop.RunResult
		want      Ending
		stopped   loop.ErrorClass
	}{
		{"exited with a result", Exit{AfterResult: true}, false, good, Ending{}, ""},
		{"stopped after a good result, cancelled", Exit{ExitCode: -1, Stop: StopCancel, AfterResult: true}, true, good,
			Ending{ExitCode: -1, StoppedAfterResult: true}, ""},
		{"error result, cancelled", Exit{ExitCode: 1, AfterResult: true}, true, bad,
			Ending{ExitCode: 1, Cancelled: true}, loop.ClassCancelled},
		{"stopped after the result grace", Exit{ExitCode: -1, Stop: StopResultGrace, AfterResult: true}, false, good,
			Ending{ExitCode: -1, StoppedAfterResult: true}, ""},
		{"stopped on cancel", Exit{ExitCode: -1, Stop: StopCancel}, true, nil, Ending{ExitCode: -1, Cancelled: true}, loop.ClassCancelled},
		{"stopped by the runner's own watch", Exit{ExitCode: -1, Stop: StopCancel}, false, nil, Ending{ExitCode: -1, GaveUp: true}, ""},
		{"wall timeout", Exit{ExitCode: -1, Stop: StopTimeout}, false, nil, Ending{ExitCode: -1, TimedOut: true}, loop.ClassTimeout},
		{"idle timeout", Exit{ExitCode: -1, Stop: StopIdle}, true, nil, Ending{ExitCode: -1, IdleTimedOut: true}, loop.ClassIdleTimeout},
		{"out by itself, no result, cancelled", Exit{ExitCode: 143}, true, nil, Ending{ExitCode: 143, Cancelled: true}, loop.ClassCancelled},
		{"out by itself, no result", Exit{ExitCode: 1}, false, nil, Ending{ExitCode: 1}, ""},
		{"out by itself, stderr kept", Exit{ExitCode: 1, Stderr: "boom\n"}, false, nil, Ending{ExitCode: 1, Stderr: "boom\n"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.x.Ending(tt.cancelled, tt.result, func() time.Time { return now })
			tt.want.Now = now
			if got != tt.want {
				t.Errorf("Ending =\n %+v, want\n %+v", got, tt.want)
			}
			if c := got.Stopped(); c != tt.stopped {
				t.Errorf("Stopped = %q, want %q", c, tt.stopped)
			}
		})
	}
	if e := (Exit{}).Ending(false, nil, nil); e.Now.IsZero() {
		t.Error("a nil clock gave no time; want time.Now")
	}
}

// TestSpecWithRequestAndFill: a Spec takes the request's directory, plan,
// log and timeouts and keeps the runner's own fields; a result takes what
// Run measured and keeps what Classify said.
func TestSpecWithRequestAndFill(t *testing.T) {
	req := loop.RunRequest{Dir: "/d", Prompt: "p", LogPath: "/d/.ralph/logs/x", LogRoot: "/d",
		Timeout: time.Minute, IdleTimeout: time.Second, Plan: &loop.PlanAccess{}}
	s := Spec{Name: "codex", Path: "/bin/codex", Stdin: "in"}.WithRequest(req)
	want := Spec{Name: "codex", Path: "/bin/codex", Stdin: "in", Dir: "/d", Plan: req.Plan,
		LogPath: req.LogPath, LogRoot: "/d", Timeout: time.Minute, IdleTimeout: time.Second}
	if s.Name != want.Name || s.Path != want.Path || s.Stdin != want.Stdin || s.Dir != want.Dir || s.Plan != want.Plan ||
		s.LogPath != want.LogPath || s.LogRoot != want.LogRoot || s.Timeout != want.Timeout || s.IdleTimeout != want.IdleTimeout {
		t.Errorf("WithRequest = %+v, want %+v", s, want)
	}
	res := loop.RunResult{Class: loop.ClassSuccess, Text: "t"}
	logErr := errors.New("disk full")
	Exit{Duration: time.Second, Stderr: "e", LogErr: logErr}.Fill(&res)
	if res.Class != loop.ClassSuccess || res.Text != "t" || res.Duration != time.Second || res.Stderr != "e" || res.LogErr != logErr {
		t.Errorf("Fill gave %+v", res)
	}
}

// TestHome: the agent's $HOME, else this user's home directory.
func TestHome(t *testing.T) {
	if got := Home([]string{"HOME=/h", "USER=x"}); got != "/h" {
		t.Errorf("Home with $HOME = %q, want /h", got)
	}
	want, _ := os.UserHomeDir()
	if got := Home([]string{"HOME="}); got != want {
		t.Errorf("Home without $HOME = %q, want %q", got, want)
	}
}

package loop_test

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

func TestHolderStringRoundTrip(t *testing.T) {
	for _, h := range []loop.Holder{
		{},
		{Host: "b1946ac9-2b8e-4c1e-9a3f-0d1e2f3a4b5c.4026531836", PID: 4242, Start: 987654},
		{Host: "machine@b:with/odd:chars", PID: 1, Start: 0},
	} {
		got, err := loop.ParseHolder(h.String())
		if err != nil {
			t.Fatalf("loop.ParseHolder(%q): %v", h.String(), err)
		}
		if diff := cmp.Diff(h, got); diff != "" {
			t.Errorf("round trip of %q (-want +got):\n%s", h.String(), diff)
		}
	}
	for _, bad := range []string{"x", "12@host", "a:1@h", "1:b@h", "1:2@", "-1:2@h", "0:2@h"} {
		if _, err := loop.ParseHolder(bad); err == nil {
			t.Errorf("loop.ParseHolder(%q) accepted it", bad)
		}
	}
}

func TestHolderLiveness(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("holder processes are told apart by /proc start times on Linux only")
	}
	if _, err := loop.ProcessStart(os.Getpid()); err != nil {
		t.Skipf("/proc cannot be read here (%v): every holder is unknown", err)
	}
	me := loop.ThisProcess()
	if me.PID != os.Getpid() || me.Start == 0 || me.Host == "" {
		t.Fatalf("loop.ThisProcess() = %+v", me)
	}
	if got := me.Liveness(); got != loop.HolderAlive {
		t.Errorf("this process: %v, want alive", got)
	}
	reused := me
	reused.Start++
	if got := reused.Liveness(); got != loop.HolderGone {
		t.Errorf("same pid, other start time (a reused pid): %v, want gone", got)
	}
	elsewhere := me
	elsewhere.Host = "another-machine"
	if got := elsewhere.Liveness(); got != loop.HolderUnknown {
		t.Errorf("another host: %v, want unknown", got)
	}
	if got := (loop.Holder{}).Liveness(); got != loop.HolderUnknown {
		t.Errorf("no holder: %v, want unknown", got)
	}

	// A process that has exited (and been reaped) is gone.
	if got := looptest.DeadHolder(t).Liveness(); got != loop.HolderGone {
		t.Errorf("exited process: %v, want gone", got)
	}
}

func TestHostIDOverride(t *testing.T) {
	t.Setenv(loop.EnvHostID, "machine-b")
	if got := loop.HostID(); got != "machine-b" {
		t.Errorf("loop.HostID() = %q with %s set", got, loop.EnvHostID)
	}
}

// TestProcessParent: the parent and the start time of one process, from
// one reading (the broker walks an agent's process tree with it).
func TestProcessParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc on Linux only")
	}
	start, err := loop.ProcessStart(os.Getpid())
	if err != nil {
		t.Skipf("/proc cannot be read here: %v", err)
	}
	ppid, pstart, err := loop.ProcessParent(os.Getpid())
	if err != nil || ppid != os.Getppid() || pstart != start {
		t.Errorf("ProcessParent = %d, %d, %v; want %d, %d", ppid, pstart, err, os.Getppid(), start)
	}
	if _, _, err := loop.ProcessParent(0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ProcessParent(0) = %v, want os.ErrNotExist", err)
	}
}

package loop

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHolderStringRoundTrip(t *testing.T) {
	for _, h := range []Holder{
		{},
		{Host: "b1946ac9-2b8e-4c1e-9a3f-0d1e2f3a4b5c.4026531836", PID: 4242, Start: 987654},
		{Host: "machine@b:with/odd:chars", PID: 1, Start: 0},
	} {
		got, err := ParseHolder(h.String())
		if err != nil {
			t.Fatalf("ParseHolder(%q): %v", h.String(), err)
		}
		if diff := cmp.Diff(h, got); diff != "" {
			t.Errorf("round trip of %q (-want +got):\n%s", h.String(), diff)
		}
	}
	for _, bad := range []string{"x", "12@host", "a:1@h", "1:b@h", "1:2@", "-1:2@h", "0:2@h"} {
		if _, err := ParseHolder(bad); err == nil {
			t.Errorf("ParseHolder(%q) accepted it", bad)
		}
	}
}

func TestHolderLiveness(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("holder processes are told apart by /proc start times on Linux only")
	}
	me := ThisProcess()
	if me.PID != os.Getpid() || me.Start == 0 || me.Host == "" {
		t.Fatalf("ThisProcess() = %+v", me)
	}
	if got := me.Liveness(); got != HolderAlive {
		t.Errorf("this process: %v, want alive", got)
	}
	reused := me
	reused.Start++
	if got := reused.Liveness(); got != HolderGone {
		t.Errorf("same pid, other start time (a reused pid): %v, want gone", got)
	}
	elsewhere := me
	elsewhere.Host = "another-machine"
	if got := elsewhere.Liveness(); got != HolderUnknown {
		t.Errorf("another host: %v, want unknown", got)
	}
	if got := (Holder{}).Liveness(); got != HolderUnknown {
		t.Errorf("no holder: %v, want unknown", got)
	}

	// A process that has exited (and been reaped) is gone. It runs until
	// its start time is read: one that exits at once may be a zombie by
	// then, which ProcessStart rightly reports as gone already.
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := ProcessStart(cmd.Process.Pid)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	dead := Holder{Host: HostID(), PID: cmd.Process.Pid, Start: start}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() // killed: an error, as expected
	if got := dead.Liveness(); got != HolderGone {
		t.Errorf("exited process: %v, want gone", got)
	}
}

func TestHostIDOverride(t *testing.T) {
	t.Setenv(EnvHostID, "machine-b")
	if got := HostID(); got != "machine-b" {
		t.Errorf("HostID() = %q with %s set", got, EnvHostID)
	}
}

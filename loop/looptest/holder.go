package looptest

import (
	"os/exec"
	"testing"

	"github.com/ralph-dev/ralph/loop"
)

// DeadHolder returns the loop.Holder of a process that ran on this host
// and is gone, for tests of what happens to the claims of a loop that died
// (holder-gone recovery, the SessionEnd hook, the sweep). It skips the test
// where process start times cannot be read (outside Linux).
func DeadHolder(t testing.TB) loop.Holder {
	t.Helper()
	return DeadHolderOn(t, loop.HostID())
}

// DeadHolderOn is DeadHolder with the host identity host: tests that set
// $RALPH_HOST_ID to keep their dead holders to themselves use it.
func DeadHolderOn(t testing.TB, host string) loop.Holder {
	t.Helper()
	// A process that lives until told: its start time is read while it
	// runs, then it is killed and reaped.
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := loop.ProcessStart(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		t.Skipf("process start times are not readable here: %v", err)
	}
	return loop.Holder{Host: host, PID: cmd.Process.Pid, Start: start}
}

//go:build unix

package main

import (
	"os/exec"
	"syscall"
	"time"
)

// ownGroup starts cmd in a process group of its own, killed whole when
// its context ends.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killGroup kills the process group pgid and gives the kernel a moment to
// finish it off: a loop that runs again must not find the last session's
// processes still running. It waits 100 ms at most: a killed process whose
// parent has not reaped it yet (a zombie) stays in the group, dead.
func killGroup(pgid int) {
	for range 50 {
		if syscall.Kill(-pgid, syscall.SIGKILL) != nil {
			return // no process left in the group
		}
		time.Sleep(2 * time.Millisecond)
	}
}

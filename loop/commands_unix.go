//go:build unix

package loop

import (
	"os/exec"
	"syscall"
)

// inGroup starts cmd in a process group of its own and makes its
// cancellation kill the whole group.
func inGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killGroup kills what is left of the process group of cmd, which has
// exited and been waited for. The group's number stays taken while a
// process is in it; an empty group is ESRCH, which is nothing to do.
func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

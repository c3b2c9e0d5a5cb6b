package servetest

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the browser in a process group of its own, which the
// kernel kills with SIGKILL if the test's thread that started it dies.
// (Debian's chromium-headless-shell is a shell script that runs the
// browser as its child: the parent-death signal reaches only the script,
// the group reaches both.)
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = new(syscall.SysProcAttr)
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// killGroup kills the process group led by pid.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

func killPID(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

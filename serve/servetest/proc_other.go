//go:build !linux

package servetest

import (
	"os"
	"os/exec"
)

// ownGroup leaves the command as it is: the process group is Linux's (the
// browser tests run there).
func ownGroup(cmd *exec.Cmd) {}

func killGroup(pid int) { killPID(pid) }

func killPID(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

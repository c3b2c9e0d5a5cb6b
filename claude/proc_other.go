//go:build !linux

package claude

import "syscall"

// agentSysProcAttr puts the agent in a process group of its own. Outside
// Linux there is no parent-death signal: an agent outlives a ralph killed
// by SIGKILL.
func agentSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

//go:build unix

package claude

import (
	"os"
	"syscall"
)

// sendSignal sends sig to pid (ignoring a pid that is gone).
func sendSignal(pid int, sig syscall.Signal) { _ = syscall.Kill(pid, sig) }

// stopSelf stops this process (SIGSTOP), as a debugger or a job-control
// stop would.
func stopSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }

// detachedAttr starts a process in a session of its own, out of reach of
// its parent's group signals.
func detachedAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

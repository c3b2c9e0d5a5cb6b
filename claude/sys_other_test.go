//go:build !unix

package claude

import (
	"os"
	"syscall"
)

// sendSignal kills pid outside Unix, whatever sig: there are no signals to send.
func sendSignal(pid int, _ syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// stopSelf cannot stop a process outside Unix: it hangs instead.
func stopSelf() { select {} }

// detachedAttr has no session to start outside Unix.
func detachedAttr() *syscall.SysProcAttr { return nil }

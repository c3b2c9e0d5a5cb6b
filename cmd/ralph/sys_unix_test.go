//go:build unix

package main

import "syscall"

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// sendSignal sends sig to pid (ignoring a pid that is gone).
func sendSignal(pid int, sig syscall.Signal) { _ = syscall.Kill(pid, sig) }

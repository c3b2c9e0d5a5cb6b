//go:build !linux

package loop

import (
	"errors"
	"os"
)

// readHostID is the host name: without /proc, processes are not told apart
// by start time, and holders are known by their leases alone.
func readHostID() string {
	h, _ := os.Hostname()
	return "host:" + h
}

// ProcessStart is not supported outside Linux: holders there are lease-only.
func ProcessStart(pid int) (int64, error) {
	return 0, errors.ErrUnsupported
}

// ProcessParent is not supported outside Linux.
func ProcessParent(pid int) (ppid int, start int64, err error) {
	return 0, 0, errors.ErrUnsupported
}

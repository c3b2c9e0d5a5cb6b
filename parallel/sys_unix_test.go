//go:build unix

package parallel_test

import (
	"syscall"
	"time"
)

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// cpuTime is the processor time this process and the children it waited
// for (git) have used: a measure of ralph's work that a busy machine does
// not stretch, as it does the wall clock.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	d := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return d(self.Utime) + d(self.Stime) + d(children.Utime) + d(children.Stime)
}

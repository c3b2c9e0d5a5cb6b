//go:build unix

package codex_test

import "syscall"

// maxRSSMB is the largest resident set of a waited-for child so far, in MB.
func maxRSSMB() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return int64(ru.Maxrss) / 1024
}

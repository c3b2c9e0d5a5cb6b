//go:build unix

package gemini

import "syscall"

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// maxRSSMB is the largest resident set of a waited-for child so far, in MB.
func maxRSSMB() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return int64(ru.Maxrss) / 1024
}

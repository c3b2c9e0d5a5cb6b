//go:build unix

package runnertest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// supported reports whether the fake agent can run here.
func supported() (bool, string) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		return false, "no /bin/sh for the fake agent"
	}
	return true, ""
}

// makeFIFO makes a FIFO at path and opens it for reading and writing, so
// that neither the agent's write nor this process's open blocks.
func makeFIFO(path string) (*os.File, error) {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR, 0)
}

// alive reports whether pid is a running process (a zombie is not).
func alive(pid int) bool {
	if data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		return !(i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X'))
	} else if _, statErr := os.Stat("/proc/self/stat"); statErr == nil {
		return false // /proc is there and the process is not
	}
	return syscall.Kill(pid, 0) == nil
}

package loop

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processGone confirms with kill(pid, 0) that no process has pid: ESRCH.
// Permission denied (another user's process) or success means it runs.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// readHostID is the boot id and the pid namespace: "<boot id>.<pid ns>".
func readHostID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	id := strings.TrimSpace(string(boot))
	if err != nil || id == "" {
		id, _ = os.Hostname()
	}
	// "pid:[4026531836]"
	if ns, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		ns = strings.TrimSuffix(strings.TrimPrefix(ns, "pid:["), "]")
		id += "." + ns
	}
	return id
}

// ProcessStart returns the start time of process pid, in clock ticks since
// boot (field 22 of /proc/PID/stat). A pid that does not run, or whose
// process has exited and waits to be reaped, is an error wrapping
// os.ErrNotExist.
func ProcessStart(pid int) (int64, error) {
	_, start, err := ProcessParent(pid)
	return start, err
}

// ProcessParent returns the parent of process pid (field 4 of
// /proc/PID/stat) and pid's start time, from one reading, so that the
// two belong to the same process; errors as ProcessStart's.
func ProcessParent(pid int) (ppid int, start int64, err error) {
	if pid <= 0 {
		return 0, 0, fmt.Errorf("loop: pid %d: %w", pid, os.ErrNotExist)
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) && !processGone(pid) {
		// /proc does not show it (not mounted, or hidepid), yet it may
		// run: nothing can be said.
		return 0, 0, fmt.Errorf("loop: pid %d: /proc does not show it: %w", pid, errors.ErrUnsupported)
	}
	if err != nil {
		return 0, 0, err
	}
	// pid (comm) state ppid … ; comm may hold spaces and parentheses, so
	// the fields are counted from the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("loop: /proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state), f[1] field 4 (ppid); field 22 (starttime)
	// is f[19].
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("loop: /proc/%d/stat: unexpected format", pid)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, 0, fmt.Errorf("loop: pid %d has exited: %w", pid, os.ErrNotExist)
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, fmt.Errorf("loop: /proc/%d/stat: parent: %w", pid, err)
	}
	if start, err = strconv.ParseInt(f[19], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("loop: /proc/%d/stat: start time: %w", pid, err)
	}
	return ppid, start, nil
}

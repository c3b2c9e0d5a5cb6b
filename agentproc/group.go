//go:build unix

package agentproc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// signalGroup sends sig to every process of the group pgid.
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
}

// termGroup asks every process of the group pgid to end: SIGTERM, then
// SIGCONT, since a stopped process (state T: a debugger, a job-control
// stop, a hook that ran `kill -STOP $PPID`) acts on SIGTERM only once it
// runs again.
func termGroup(pgid int) {
	signalGroup(pgid, syscall.SIGTERM)
	signalGroup(pgid, syscall.SIGCONT)
}

// groupAlive reports whether any live process of the group pgid is left.
// Zombies do not count: a grandchild orphaned to an init that does not reap
// (as in some containers) is dead all the same.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc: trust kill
	}
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		data, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}

// reapGroup stops what is left of the process group pgid once its leader
// has exited: SIGTERM (unless termed: it was sent already), then SIGKILL if
// something is still there at killAt. It returns at once when the group is
// already empty, which is the common case.
func reapGroup(pgid int, killAt time.Time, termed bool) {
	if !groupAlive(pgid) {
		return
	}
	if !termed {
		termGroup(pgid)
	}
	for time.Now().Before(killAt) {
		time.Sleep(10 * time.Millisecond)
		if !groupAlive(pgid) {
			return
		}
	}
	signalGroup(pgid, syscall.SIGKILL)
	// SIGKILL is delivered asynchronously, and on a busy machine the
	// processes may still be running for a moment: wait (boundedly) until
	// the kernel has taken them down, so that Run returns with the group
	// gone.
	for deadline := time.Now().Add(killWait); groupAlive(pgid) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

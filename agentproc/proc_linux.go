package agentproc

import (
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// agentSysProcAttr puts the agent in a process group of its own — in a
// session of its own when sandboxed (the sandbox's terminal rule) — and
// gives it a parent-death signal: if ralph dies, even by SIGKILL, the
// kernel kills the agent. The signal is tied to the thread that forked the
// agent, not to the process; startAgent sees to it that this thread lives
// as long as the agent (see there).
func agentSysProcAttr(sandboxed bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: !sandboxed, Setsid: sandboxed, Pdeathsig: syscall.SIGKILL}
}

var subreaper sync.Once

// becomeSubreaper makes this process a child subreaper, once: a process
// whose parent dies is re-parented to it (not to init), so that what an
// agent left behind can still be found by its ancestry, and reaped. On a
// kernel without it (before 3.4) orphans go to init, and the marker alone
// finds them.
func becomeSubreaper() {
	subreaper.Do(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

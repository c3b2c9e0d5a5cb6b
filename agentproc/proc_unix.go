//go:build unix && !linux

package agentproc

import (
	"os"
	"syscall"
	"time"
)

// agentSysProcAttr puts the agent in a process group of its own (a
// session of its own when sandboxed). Outside Linux there is no
// parent-death signal: an agent outlives a ralph killed by SIGKILL.
func agentSysProcAttr(sandboxed bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: !sandboxed, Setsid: sandboxed}
}

// becomeSubreaper does nothing outside Linux: orphans go to init.
func becomeSubreaper() {}

// family is, outside Linux, the agent's process group only: a process that
// left it (setsid) is out of reach.
type family struct{ pgid int }

func newFamily(agent int, _ string, _ ...*os.File) *family { return &family{pgid: agent} }

// snapshot has nothing to record outside Linux.
func (f *family) snapshot() {}

// term sends the group SIGTERM and SIGCONT.
func (f *family) term() { termGroup(f.pgid) }

// kill sends the group SIGKILL.
func (f *family) kill() { signalGroup(f.pgid, syscall.SIGKILL) }

// reap stops what is left of the agent's process group.
func (f *family) reap(killAt time.Time, termed bool) { reapGroup(f.pgid, killAt, termed) }

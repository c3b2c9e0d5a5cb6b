package claude

import "syscall"

// agentSysProcAttr puts the agent in a process group of its own and gives
// it a parent-death signal: if ralph dies, even by SIGKILL, the kernel
// kills the agent. The signal is tied to the thread that forked the agent,
// not to the process; startAgent sees to it that this thread lives as
// long as the agent (see there).
func agentSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

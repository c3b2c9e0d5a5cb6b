//go:build !linux

package broker

import (
	"errors"
	"net"
)

// process is the agent's process.
type process struct{ pid int }

func admit(pid int) (*process, error) { return &process{pid: pid}, nil }

// checkPeer refuses every connection: on this system the broker cannot
// tell the agent's processes from another agent's (see the package
// documentation), so a sandboxed agent reads the plan read-only instead.
func checkPeer(c *net.UnixConn, root *process) error {
	return errors.New("the ralph broker checks its peers on Linux only")
}

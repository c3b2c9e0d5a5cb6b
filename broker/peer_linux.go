package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"github.com/ralph-dev/ralph/loop"
)

// process is one process, named so that a reused pid is not taken for it:
// its pid and its start time (clock ticks since boot).
type process struct {
	pid   int
	start int64
}

// maxDepth bounds the walk from a peer up to the agent's process.
const maxDepth = 4096

// Linux constants the syscall package lacks.
const (
	soPeerPidfd        = 77  // SO_PEERPIDFD, Linux 6.5
	sysPidfdSendSignal = 424 // pidfd_send_signal, the same number on every architecture
)

func admit(pid int) (*process, error) {
	st, err := readStat(pid)
	if err != nil {
		return nil, err
	}
	return &process{pid: pid, start: st.start}, nil
}

// checkPeer is the peer check of the package documentation: the process
// at the other end of c runs as this process's user and is root or a
// descendant of root, walked through the parent links of /proc and
// checked again once walked; with SO_PEERPIDFD (Linux 6.5) the peer is
// also known to be alive after the walk, so its pid was not reused
// during it.
func checkPeer(c *net.UnixConn, root *process) error {
	if root == nil {
		return errors.New("the agent's process is not known yet")
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	pidfd := -1
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if credErr != nil {
			return
		}
		var v int32
		l := uint32(unsafe.Sizeof(v))
		_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.SOL_SOCKET, soPeerPidfd,
			uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&l)), 0)
		if e == 0 {
			pidfd = int(v)
		}
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("peer credentials: %w", credErr)
	}
	if pidfd >= 0 {
		defer syscall.Close(pidfd)
	}
	if uid := uint32(os.Geteuid()); cred.Uid != uid {
		return fmt.Errorf("the connecting process runs as uid %d, not %d", cred.Uid, uid)
	}
	if cred.Pid <= 0 {
		return errors.New("the connecting process is not visible from here")
	}
	if err := descends(int(cred.Pid), *root); err != nil {
		return err
	}
	if pidfd >= 0 {
		if _, _, e := syscall.Syscall6(sysPidfdSendSignal, uintptr(pidfd), 0, 0, 0, 0, 0); e != 0 {
			return fmt.Errorf("the connecting process %d ended during the check", cred.Pid)
		}
	}
	return nil
}

// descends reports (nil) that pid is root's process or one of its
// descendants. Each process on the way is named by its start time, and
// the chain is read a second time once walked: a process that died, and
// whose pid went to another, during the walk fails the second reading.
func descends(pid int, root process) error {
	peer := pid
	var chain []process
	for range maxDepth {
		st, err := readStat(pid)
		if err != nil {
			return fmt.Errorf("the connecting process %d: %w", peer, err)
		}
		chain = append(chain, process{pid: pid, start: st.start})
		if pid == root.pid {
			if st.start != root.start {
				return fmt.Errorf("the agent's process %d has ended", root.pid)
			}
			for i, p := range chain[:len(chain)-1] {
				again, err := readStat(p.pid)
				if err != nil || again.start != p.start || again.ppid != chain[i+1].pid {
					return fmt.Errorf("the connecting process %d changed during the check", peer)
				}
			}
			return nil
		}
		if st.ppid <= 0 {
			break
		}
		pid = st.ppid
	}
	return fmt.Errorf("the connecting process %d is not the agent's (process %d) nor one it started", peer, root.pid)
}

type stat struct {
	ppid  int
	start int64
}

// readStat reads the parent and the start time of pid
// (loop.ProcessParent: one reading of /proc/PID/stat).
func readStat(pid int) (stat, error) {
	ppid, start, err := loop.ProcessParent(pid)
	return stat{ppid: ppid, start: start}, err
}

//go:build unix && !solaris && !aix

package loop

import (
	"errors"
	"os"
	"syscall"
)

// treeLocks: flock(2) keeps the builds of one tree apart.
const treeLocks = true

// tryLock takes flock(2) on f, exclusive or shared, without waiting (a
// lock f holds is converted); ok is false when another open file holds a
// lock that conflicts.
func tryLock(f *os.File, exclusive bool) (ok bool, err error) {
	how := syscall.LOCK_SH | syscall.LOCK_NB
	if exclusive {
		how = syscall.LOCK_EX | syscall.LOCK_NB
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), how)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	if errors.Is(ferr, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return ferr == nil, ferr
}

//go:build unix

package safefile

import (
	"io/fs"
	"syscall"
)

// oNonblock keeps open(2) from waiting for a FIFO's other end.
const oNonblock = syscall.O_NONBLOCK

// links returns fi's hard link count.
func links(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

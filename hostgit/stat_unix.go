//go:build unix

package hostgit

import (
	"os"
	"syscall"
)

// devOf is the device fi is on, for GIT_DISCOVERY_ACROSS_FILESYSTEM.
func devOf(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}

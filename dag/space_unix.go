//go:build unix

package dag

import (
	"errors"
	"syscall"
)

// lowSpace is the free space under which a failed write is put down to a
// full disk.
const lowSpace = 256 << 10

// writeTrouble says, in words a user acts on, why files in dir cannot be
// written: "DIR is read-only", "no space left on device (DIR)"; "" when
// neither is so.
func writeTrouble(dir string) string {
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		if errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			return dir + " is read-only"
		}
	}
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil && uint64(st.Bavail)*uint64(st.Bsize) < lowSpace {
		return "no space left on device (" + dir + ")"
	}
	return ""
}

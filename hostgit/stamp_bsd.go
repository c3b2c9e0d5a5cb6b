//go:build darwin || freebsd || netbsd || openbsd

package hostgit

import "syscall"

func statStamp(f string) stamp {
	var st syscall.Stat_t
	if err := syscall.Stat(f, &st); err != nil {
		return stamp{}
	}
	return stamp{exists: true, dev: uint64(st.Dev), ino: uint64(st.Ino), size: uint64(st.Size), mode: uint32(st.Mode),
		mtime: st.Mtimespec.Nano(), ctime: st.Ctimespec.Nano()}
}

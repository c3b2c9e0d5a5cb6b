package hostgit

import "syscall"

func statStamp(f string) stamp {
	var st syscall.Stat_t
	if err := syscall.Stat(f, &st); err != nil {
		return stamp{}
	}
	return stamp{exists: true, dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size), mode: st.Mode,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

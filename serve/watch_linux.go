//go:build linux

package serve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ralph-dev/ralph/loop"
)

// watchFiles reports changes of the database file and of the sessions'
// event logs with inotify until ctx is done: the read blocks in the
// runtime's poller, so nothing runs while nothing changes. Where inotify
// cannot be had, it falls back to pollFiles.
func watchFiles(ctx context.Context, dbPath, base, logDir string, changes chan<- change, ready func()) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		pollFiles(ctx, dbPath, base, logDir, changes, ready)
		return
	}
	f := os.NewFile(uintptr(fd), "inotify")
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	w := &inotify{fd: fd, paths: map[int32]string{}}
	const fileMask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE
	dbDir, dbBase := "", ""
	if dbPath != "" {
		dbDir, dbBase = filepath.Dir(dbPath), filepath.Base(dbPath)
		if !w.add(dbDir, fileMask) {
			f.Close()
			pollFiles(ctx, dbPath, base, logDir, changes, ready)
			return
		}
	}
	logParent := filepath.Dir(logDir)
	// The log directories are watched without following a link at them
	// (IN_DONT_FOLLOW); what is read is read through safefile anyway.
	watchLogs := func() {
		if w.add(logDir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW) {
			names, _ := recentSessions(base, logDir, maxSessions)
			for _, n := range names {
				w.add(filepath.Join(logDir, n), fileMask|unix.IN_DONT_FOLLOW)
			}
		}
	}
	if _, err := os.Stat(logDir); err == nil {
		watchLogs()
	} else {
		w.add(logParent, unix.IN_CREATE|unix.IN_MOVED_TO) // for logs/ to appear
	}
	ready()
	buf := make([]byte, 64*1024)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if ctx.Err() == nil {
				// The descriptor broke: look at the files instead.
				pollFiles(ctx, dbPath, base, logDir, changes, ready)
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			name := strings.TrimRight(string(nameBytes), "\x00")
			dir := w.paths[ev.Wd]
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				send(ctx, changes, change{db: true})
			case dir == dbDir && dbBase != "" && (name == dbBase || name == dbBase+"-wal"):
				send(ctx, changes, change{db: true})
			case dir == logParent && name == filepath.Base(logDir):
				watchLogs()
			case dir == logDir && ev.Mask&unix.IN_ISDIR != 0 && validName(name):
				w.add(filepath.Join(logDir, name), fileMask|unix.IN_DONT_FOLLOW)
				send(ctx, changes, change{session: name})
			case filepath.Dir(dir) == logDir && name == loop.EventLogName:
				send(ctx, changes, change{session: filepath.Base(dir)})
			}
		}
	}
}

// inotify keeps the watched directories by watch descriptor.
type inotify struct {
	fd    int
	paths map[int32]string
}

// add watches dir (adding mask to a watch it already has).
func (w *inotify) add(dir string, mask uint32) bool {
	wd, err := unix.InotifyAddWatch(w.fd, dir, mask|unix.IN_MASK_ADD)
	if err != nil {
		return false
	}
	w.paths[int32(wd)] = dir
	return true
}

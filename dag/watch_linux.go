package dag

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"slices"
	"syscall"
)

// watchFiles calls wake whenever one of the files names in dir is
// written, created or moved there, by any process (inotify(7)); an
// overflow of the kernel's queue wakes too. Close stops it. The
// directory's own link is not followed: a link planted in its place
// makes the watch fail, and the waits look every watchEvery instead.
func watchFiles(dir string, names []string, wake func()) (io.Closer, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	const mask = syscall.IN_MODIFY | syscall.IN_CREATE | syscall.IN_MOVED_TO | syscall.IN_ONLYDIR | syscall.IN_DONT_FOLLOW
	if _, err := syscall.InotifyAddWatch(fd, dir, mask); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	// Non-blocking, so the runtime's poller waits for it and Close ends a
	// Read under way.
	f := os.NewFile(uintptr(fd), "inotify "+dir)
	go func() {
		buf := make([]byte, 64*(syscall.SizeofInotifyEvent+syscall.NAME_MAX+1))
		for {
			n, err := f.Read(buf)
			if err != nil {
				return // closed
			}
			if touched(buf[:n], names) {
				wake()
			}
		}
	}()
	return f, nil
}

// touched reports whether the inotify events in buf name one of names,
// or say events were lost.
func touched(buf []byte, names []string) bool {
	for len(buf) >= syscall.SizeofInotifyEvent {
		// struct inotify_event: wd, mask, cookie, len, then the name.
		mask := binary.NativeEndian.Uint32(buf[4:])
		end := syscall.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[12:]))
		if end > len(buf) {
			return true // cannot be: look at the files
		}
		if mask&syscall.IN_Q_OVERFLOW != 0 {
			return true
		}
		name := buf[syscall.SizeofInotifyEvent:end]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if slices.Contains(names, string(name)) {
			return true
		}
		buf = buf[end:]
	}
	return false
}

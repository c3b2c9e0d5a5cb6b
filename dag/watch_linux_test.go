package dag

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWatchFiles: a write to a watched file, by anyone, wakes; the
// watch is of the directory named, never of one a link points to.
func TestWatchFiles(t *testing.T) {
	dir := t.TempDir()
	woken := make(chan struct{}, 16)
	w, err := watchFiles(dir, []string{"progress.db", "progress.db-wal"}, func() { woken <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.WriteFile(filepath.Join(dir, "progress.db-wal"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("a write of progress.db-wal did not wake the watch")
	}

	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if w, err := watchFiles(link, []string{"progress.db"}, func() {}); err == nil {
		w.Close()
		t.Error("watchFiles followed a link to a directory")
	}
}

// TestTouched reads inotify events as the kernel writes them: each
// header, then its name padded with NULs.
func TestTouched(t *testing.T) {
	event := func(mask uint32, name string) []byte {
		n := 0
		if name != "" {
			n = (len(name)/16 + 1) * 16
		}
		b := make([]byte, syscall.SizeofInotifyEvent+n)
		binary.NativeEndian.PutUint32(b[4:], mask)
		binary.NativeEndian.PutUint32(b[12:], uint32(n))
		copy(b[syscall.SizeofInotifyEvent:], name)
		return b
	}
	names := []string{"progress.db", "progress.db-wal"}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	for _, c := range []struct {
		name string
		buf  []byte
		want bool
	}{
		{"the log written", event(syscall.IN_MODIFY, "progress.db-wal"), true},
		{"another file", event(syscall.IN_MODIFY, "progress.db-shm"), false},
		{"a prefix of a name", event(syscall.IN_MODIFY, "progress"), false},
		{"the database after another", cat(event(syscall.IN_CREATE, "notes"), event(syscall.IN_MODIFY, "progress.db")), true},
		{"events lost", event(syscall.IN_Q_OVERFLOW, ""), true},
		{"cut short", event(syscall.IN_MODIFY, "progress.db")[:20], true},
	} {
		if got := touched(c.buf, names); got != c.want {
			t.Errorf("%s: touched = %v; want %v", c.name, got, c.want)
		}
	}
}

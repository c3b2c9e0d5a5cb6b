package progress

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/safefile"
)

// writeFile replaces the file at path (below base, trusted) with data
// atomically: it writes a temporary file in the same directory, gives it
// the old file's mode, fsyncs it, and renames it over path; then it
// fsyncs the directory (best effort: some file systems refuse). If
// anything fails before the rename, the old file is untouched and the
// temporary file removed. No link is followed (package safefile): not in
// the directories below base, and not at path, which is replaced, never
// written through.
func writeFile(base, path string, data string, rename func(d *safefile.Dir, oldname, newname string) error) error {
	dir, name := filepath.Split(path)
	d, err := safefile.OpenDir(base, dir)
	if err != nil {
		return fmt.Errorf("progress: write %s: %w", path, err)
	}
	defer d.Close()
	mode := os.FileMode(0o644)
	if fi, err := d.Lstat(name); err == nil && fi.Mode().IsRegular() {
		mode = fi.Mode().Perm()
	}
	err = d.Replace(name, mode, func(f *os.File) error {
		_, err := f.WriteString(data)
		return err
	}, rename)
	if err != nil {
		return fmt.Errorf("progress: write %s: %w", path, err)
	}
	return nil
}

// readString reads the file at path (below base, no link followed) into
// a string: one copy of the file, read through buf.
func readString(base, path string, buf []byte) (string, error) {
	f, err := safefile.Open(base, path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		b.Grow(int(fi.Size()))
	}
	for {
		n, err := f.Read(buf)
		b.Write(buf[:n])
		if err == io.EOF {
			return b.String(), nil
		}
		if err != nil {
			return "", err
		}
	}
}

// holds reports whether the file at path (below base, no link followed)
// holds exactly content. It reads the file through buf and stops at the
// first difference.
func holds(base, path, content string, buf []byte) (bool, error) {
	f, err := safefile.Open(base, path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() != int64(len(content)) {
		return false, nil
	}
	for off := 0; ; {
		n, err := f.Read(buf)
		if off+n > len(content) || string(buf[:n]) != content[off:off+n] {
			return false, nil
		}
		off += n
		if err == io.EOF {
			return off == len(content), nil
		}
		if err != nil {
			return false, err
		}
	}
}

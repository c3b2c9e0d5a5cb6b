package progress

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// writeFile replaces the file at path with data atomically: it writes a
// temporary file in the same directory, gives it the old file's mode,
// fsyncs it, and renames it over path; then it fsyncs the directory (best
// effort: some file systems refuse). If anything fails before the rename,
// the old file is untouched and the temporary file removed. A symlink at
// path is followed: its target is replaced, the link stays.
func writeFile(path string, data string, rename func(oldpath, newpath string) error) (err error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".ralph-*.tmp")
	if err != nil {
		return fmt.Errorf("progress: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("progress: write %s: %w", path, err)
		}
	}()
	if _, err = f.WriteString(data); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync() // best effort: the rename is durable on most systems anyway
		d.Close()
	}
	return nil
}

// readString reads the file at path into a string: one copy of the file,
// read through buf.
func readString(path string, buf []byte) (string, error) {
	f, err := os.Open(path)
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

// holds reports whether the file at path holds exactly content. It reads
// the file through buf and stops at the first difference.
func holds(path, content string, buf []byte) (bool, error) {
	f, err := os.Open(path)
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

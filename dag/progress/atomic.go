package progress

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeFile replaces the file at path with data atomically: it writes a
// temporary file in the same directory, gives it the old file's mode,
// fsyncs it, and renames it over path; then it fsyncs the directory (best
// effort: some file systems refuse). If anything fails before the rename,
// the old file is untouched and the temporary file removed. A symlink at
// path is followed: its target is replaced, the link stays.
func writeFile(path string, data []byte, rename func(oldpath, newpath string) error) (err error) {
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
	if _, err = f.Write(data); err != nil {
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

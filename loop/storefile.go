package loop

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Opening directories and writing files where an agent can plant links
// (the verifier's snapshot store, the repository's git directory, .ralph)
// without following them. (Package safefile, being written alongside,
// does this for every such place; these few helpers are the guard's own
// until then.)

// openRootNoFollow opens dir, which must be a directory and not a
// symlink, as an os.Root, and checks that what it opened is what it
// looked at.
func openRootNoFollow(dir string) (*os.Root, error) {
	li, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !li.IsDir() {
		return nil, fmt.Errorf("%s: not a directory (%s)", dir, li.Mode().Type())
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	if st, err := root.Stat("."); err != nil || !os.SameFile(li, st) {
		root.Close()
		return nil, fmt.Errorf("%s: replaced while it was opened", dir)
	}
	return root, nil
}

// realDirsBelow reports an error unless every directory from base down to
// path (base itself not included) is a real directory or does not exist
// yet: no symlink on the way. A path not below base is not checked.
func realDirsBelow(base, path string) error {
	rel, err := filepath.Rel(base, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil
	}
	p := base
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is a %s, not a directory", p, typeName(fi.Mode()))
		}
	}
	return nil
}

// storeBase is the directory that holds the .ralph a store path is in
// (the project's root), or the store's parent when it is in none.
func storeBase(dir string) string {
	sep := string(filepath.Separator)
	if i := strings.LastIndex(dir, sep+".ralph"+sep); i >= 0 {
		return dir[:i]
	}
	return filepath.Dir(dir)
}

// writeFileIn writes name (relative to root) as a new file renamed over
// the old one: a symlink at name is replaced, not followed, and a file
// hard-linked from elsewhere is left alone. perm is set exactly.
func writeFileIn(root *os.Root, name string, data []byte, perm fs.FileMode) error {
	var b [8]byte
	rand.Read(b[:])
	tmp := filepath.Join(filepath.Dir(name), ".ralph-tmp-"+hex.EncodeToString(b[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
	}
	return err
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

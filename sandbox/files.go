package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// copyFile copies the regular file from to the new file to, keeping its
// permission bits. A from that is not a regular file (a FIFO, a device) is
// refused without blocking; a missing one is fs.ErrNotExist.
func copyFile(from, to string) error {
	in, err := openNB(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w", from, errNotRegular)
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyMax is the largest file of a state directory that the scratch gets
// a copy of; a larger one (a history, a log) is mounted read-only.
const copyMax = 1 << 20

// stateMount is a state directory as a session sees it: scratch mounted
// at dir, and over it the real entries, each read-only unless rw.
type stateMount struct {
	dir     string // the real directory, resolved
	scratch string
	entries []stateEntry
	// keep and fresh are the State's, for a sandbox that cannot mount
	// (macOS: the real directory, with only those writable).
	keep, fresh []string
}

// stateEntry is one real entry of a state directory shown in its scratch.
type stateEntry struct {
	name string
	rw   bool
}

// prepareState makes the scratch of st.Dir (resolved: dir) in scratch:
// for each entry of the real directory, a copy (a regular file of at most
// copyMax bytes that is not kept), nothing (a Fresh one, or a dangling
// symbolic link), or an empty mount point over which the real entry is
// mounted (kept ones writable).
func prepareState(st State, dir, scratch string) (stateMount, error) {
	m := stateMount{dir: dir, scratch: scratch, keep: st.Keep, fresh: st.Fresh}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return m, err
	}
	if fi, err := os.Stat(dir); err == nil {
		// The scratch stands in for dir: the same permissions.
		_ = os.Chmod(scratch, fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return m, err
	}
	for _, e := range entries {
		name := e.Name()
		if slices.ContainsFunc(st.Fresh, func(pat string) bool { ok, _ := path.Match(pat, name); return ok }) {
			continue
		}
		real := filepath.Join(dir, name)
		fi, err := os.Stat(real)
		if err != nil {
			continue // a dangling link
		}
		keep := slices.Contains(st.Keep, name)
		dst := filepath.Join(scratch, name)
		switch {
		case fi.IsDir():
			err = os.Mkdir(dst, fi.Mode().Perm()|0o700)
		case !keep && fi.Mode().IsRegular() && fi.Size() <= copyMax:
			if err = copyFile(real, dst); err == nil {
				continue
			}
			if !errors.Is(err, errNotRegular) {
				return m, err
			}
			fallthrough // swapped for something else meanwhile: mounted as it is
		default:
			err = os.WriteFile(dst, nil, 0o600)
		}
		if err != nil {
			return m, err
		}
		m.entries = append(m.entries, stateEntry{name: name, rw: keep})
	}
	return m, nil
}

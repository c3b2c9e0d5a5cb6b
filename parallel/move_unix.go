//go:build linux || darwin

package parallel

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/ralph-dev/ralph/safefile"
)

// renameBetween renames oldname in the directory from to newname in the
// directory to, by their descriptors (renameat): no link on the way to
// either is followed, and oldname itself is moved as it is (a link is
// moved, not followed).
func renameBetween(from *safefile.Dir, oldname string, to *safefile.Dir, newname string) error {
	of, err := from.OpenSelf()
	if err != nil {
		return err
	}
	defer of.Close()
	nf, err := to.OpenSelf()
	if err != nil {
		return err
	}
	defer nf.Close()
	if err := unix.Renameat(int(of.Fd()), oldname, int(nf.Fd()), newname); err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(from.Path(), oldname), New: filepath.Join(to.Path(), newname), Err: err}
	}
	return nil
}

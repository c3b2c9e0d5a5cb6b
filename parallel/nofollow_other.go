//go:build !unix

package parallel

import (
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens path for reading without following a link at it (an
// error that is syscall.ELOOP then). Without O_NOFOLLOW the file is looked
// at first and checked to be the one opened: a link put in its place
// between the two is refused the same way.
func openNoFollow(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	loop := &fs.PathError{Op: "open", Path: path, Err: syscall.ELOOP}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, loop
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !os.SameFile(fi, st) {
		f.Close()
		return nil, loop
	}
	return f, nil
}

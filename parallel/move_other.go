//go:build !linux && !darwin

package parallel

import (
	"os"
	"path/filepath"

	"github.com/ralph-dev/ralph/safefile"
)

// renameBetween renames oldname in the directory from to newname in the
// directory to. Without renameat here, it renames by path: the
// directories were reached without following a link, but one swapped in
// since would be followed.
func renameBetween(from *safefile.Dir, oldname string, to *safefile.Dir, newname string) error {
	return os.Rename(filepath.Join(from.Path(), oldname), filepath.Join(to.Path(), newname))
}

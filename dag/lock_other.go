//go:build !unix

package dag

import (
	"errors"
	"os"
)

// Without flock(2), writers of different processes are ordered by SQLite's
// locking alone.
const flockSupported = false

var errNoFlock = errors.New("flock not supported")

func tryFlock(*os.File) (bool, error) { return false, errNoFlock }
func flock(*os.File) error            { return errNoFlock }
func funlock(*os.File) error          { return errNoFlock }

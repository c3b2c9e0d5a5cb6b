//go:build !unix

package runnertest

import (
	"errors"
	"os"
)

func supported() (bool, string) { return false, "the fake agent needs a POSIX shell" }

func makeFIFO(string) (*os.File, error) { return nil, errors.ErrUnsupported }

func alive(int) bool { return false }

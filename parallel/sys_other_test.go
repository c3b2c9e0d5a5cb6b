//go:build !unix

package parallel_test

import (
	"errors"
	"time"
)

func mkfifo(string) error { return errors.ErrUnsupported }

// cpuTime is not measured outside Unix.
func cpuTime() time.Duration { return 0 }

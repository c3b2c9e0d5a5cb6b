//go:build !linux && !darwin

package sandbox

import (
	"fmt"
	"runtime"
)

func find() (*Sandbox, error) {
	return nil, fmt.Errorf("%w on %s: ralph sandboxes agents with bubblewrap on Linux and sandbox-exec on macOS only", ErrUnavailable, runtime.GOOS)
}

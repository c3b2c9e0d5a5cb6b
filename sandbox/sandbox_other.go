//go:build !linux && !darwin

package sandbox

import (
	"fmt"
	"runtime"
)

func find() (*Sandbox, error) {
	return nil, fmt.Errorf("%w on %s: ralph sandboxes agents with bubblewrap on Linux and sandbox-exec on macOS only", ErrUnavailable, runtime.GOOS)
}

func (s *Sandbox) command(Policy, string, []string) (string, []string, func(), error) {
	return "", nil, nil, fmt.Errorf("%w on %s", ErrUnavailable, runtime.GOOS)
}

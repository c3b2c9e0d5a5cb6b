package sandbox

import (
	"fmt"
	"os/exec"
)

func find() (*Sandbox, error) {
	p, err := exec.LookPath("sandbox-exec")
	if err != nil {
		return nil, fmt.Errorf("%w: no sandbox-exec on PATH (it ships with macOS in /usr/bin: check PATH)", ErrUnavailable)
	}
	return &Sandbox{Path: p}, nil
}

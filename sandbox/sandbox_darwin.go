package sandbox

import (
	"fmt"
	"os"
	"os/exec"
)

func find() (*Sandbox, error) {
	p, err := exec.LookPath("sandbox-exec")
	if err != nil {
		return nil, fmt.Errorf("%w: no sandbox-exec on PATH (it ships with macOS in /usr/bin: check PATH)", ErrUnavailable)
	}
	return &Sandbox{Path: p}, nil
}

func (s *Sandbox) command(p Policy, path string, args []string) (string, []string, func(), error) {
	f, err := os.CreateTemp("", "ralph-sandbox-*.sb")
	if err != nil {
		return "", nil, nil, fmt.Errorf("sandbox: writing the profile: %w", err)
	}
	cleanup := func() { os.Remove(f.Name()) }
	_, err = f.WriteString(profile(grants(p.Dir, p.Writable)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return "", nil, nil, fmt.Errorf("sandbox: writing the profile: %w", err)
	}
	// sandbox-exec applies the profile to itself and then executes path:
	// the agent keeps its pid, and signals reach it directly.
	return s.Path, append([]string{"-f", f.Name(), path}, args...), cleanup, nil
}

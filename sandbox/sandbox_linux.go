package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

const installHint = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; Arch: pacman -S bubblewrap)"

func find() (*Sandbox, error) {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("%w: no bwrap on PATH: %s", ErrUnavailable, installHint)
	}
	s := &Sandbox{Path: p}
	if err := s.probe(); err != nil {
		return nil, err
	}
	return s, nil
}

// probe runs a command in the sandbox with the arguments every run gets,
// so that a bubblewrap that cannot work here fails Find, not the first
// agent.
func (s *Sandbox) probe() error {
	// env with no arguments prints the environment: a program known to
	// exist (signalEnv needs it too) that succeeds.
	env, err := exec.LookPath("env")
	if err != nil {
		env = "/usr/bin/env"
	}
	path, args := bwrapCommand(s.Path, signalEnv(), os.Geteuid() == 0, "/", nil, env, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%w: %s does not run here: %s (bubblewrap needs user namespaces when not run as root: "+
			"check sysctl kernel.unprivileged_userns_clone=1 (Debian) or user.max_user_namespaces > 0, and on Ubuntu 24.04 "+
			"that AppArmor lets bwrap create them (kernel.apparmor_restrict_unprivileged_userns))", ErrUnavailable, s.Path, msg)
	}
	return nil
}

// signalEnv is the path of an env (GNU coreutils 8.31 or later) that can
// start bwrap with SIGTERM ignored and the agent with it restored, or ""
// when there is none (busybox, older coreutils). Asked once per process.
var signalEnv = sync.OnceValue(func() string {
	p, err := exec.LookPath("env")
	if err != nil {
		p = "/usr/bin/env" // PATH may be empty or odd; shebangs rely on this one
	}
	if exec.Command(p, "--ignore-signal=TERM", "--default-signal=TERM", p).Run() != nil {
		return ""
	}
	return p
})

package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/ralph-dev/ralph/sandbox"
)

// A project's Boundary is decided once, before any agent runs; each
// agent then gets a session: its tree writable, .ralph/ and the
// repository read-only, a private copy of the git metadata, and a scratch
// copy of its state directory in which only its login is the real file.
func Example() {
	s, err := sandbox.Find()
	if errors.Is(err, sandbox.ErrUnavailable) {
		fmt.Println(err) // says what to install
		return
	}
	root, _ := os.Getwd()
	box, err := s.Boundary(sandbox.BoundaryParams{Root: root})
	if err != nil {
		fmt.Println(err)
		return
	}
	scratch, err := os.MkdirTemp("", "ralph-sandbox-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(scratch)
	home, _ := os.UserHomeDir()
	sess, err := box.Prepare(sandbox.SessionParams{
		Dir:     root,
		Path:    "/usr/bin/git",
		Args:    []string{"status", "--short"},
		Env:     os.Environ(),
		State:   []sandbox.State{{Dir: filepath.Join(home, ".codex"), Keep: []string{"auth.json"}}},
		Scratch: scratch,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	cmd := exec.Command(sess.Path, sess.Args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = sess.Env, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Println(err)
	}
	if c := sess.Close(context.Background()); c != nil && !c.Descends {
		fmt.Println("the agent's HEAD left", c.Start)
	}
}

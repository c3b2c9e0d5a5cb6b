package sandbox_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/ralph-dev/ralph/sandbox"
)

// An agent working in dir may write what Dirs says plus its own state
// directory; everything else is read-only.
func Example() {
	s, err := sandbox.Find()
	if errors.Is(err, sandbox.ErrUnavailable) {
		fmt.Println(err) // says what to install
		return
	}
	dir, _ := os.Getwd()
	env := os.Environ()
	home, _ := os.UserHomeDir()
	p := sandbox.Policy{Dir: dir, Writable: append(sandbox.Dirs(dir, env), home+"/.codex")}
	path, args, cleanup, err := s.Command(p, "/usr/bin/git", []string{"status"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	cmd := exec.Command(path, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Println(err)
	}
}

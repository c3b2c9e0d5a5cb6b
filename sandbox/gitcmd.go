package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The sandbox runs git on the host twice at most per session, both here:
// to drop core.worktree from the private copy of the config (only when
// the config mentions it), and to tell whether the agent's HEAD descends
// from where it began. Neither reads a repository's configuration: the
// first names its file (--file), the second runs with GIT_DIR a directory
// of the sandbox's own. They stay here rather than in package hostgit:
// the sandbox uses the standard library only, and neither command needs
// hostgit's blanking of a repository's programs, there being no
// repository of anyone's but the sandbox's own.

// gitWaitDelay bounds how long git's leftovers may hold its pipes.
const gitWaitDelay = 5 * time.Second

// hostGit runs git with env (added to ralph's own, git's location
// variables removed) and returns its exit code and output.
func hostGit(ctx context.Context, env []string, args ...string) (int, string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(withoutGitLocation(os.Environ()), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = gitWaitDelay
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), nil
	}
	if err != nil {
		return -1, out.String(), err
	}
	return 0, out.String(), nil
}

// dropWorktreeSetting removes core.worktree from the config file at path
// (a copy of the repository's): the private checkout's work tree is where
// its .git is mounted.
func dropWorktreeSetting(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && !strings.Contains(strings.ToLower(string(b)), "worktree") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: private checkout: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Exit 5: there was no such key.
	code, out, err := hostGit(ctx, nil, "config", "--file", path, "--unset-all", "core.worktree")
	if err != nil || code != 0 && code != 5 {
		return fmt.Errorf("sandbox: private checkout: git config --unset-all core.worktree: exit %d: %v %s", code, err, strings.TrimSpace(out))
	}
	return nil
}

// isAncestor reports whether commit a is b or an ancestor of b, reading
// the private objects and the repository's. Anything but a clear yes —
// a missing object, a git that fails or times out — is no. The agent
// writes the private objects/info: a commit-graph there could claim any
// parents for its commits, so git reads none (core.commitGraph=false)
// and walks the commits themselves.
func (c *privateCheckout) isAncestor(ctx context.Context, a, b string) bool {
	host := filepath.Join(c.scratch, "host-git")
	format := "sha1"
	if len(a) == 64 {
		format = "sha256"
	}
	config := "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = " + format + "\n"
	for _, d := range []string{filepath.Join(host, "refs"), filepath.Join(host, "objects")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return false
		}
	}
	if os.WriteFile(filepath.Join(host, "HEAD"), []byte("ref: refs/heads/none\n"), 0o600) != nil ||
		os.WriteFile(filepath.Join(host, "config"), []byte(config), 0o600) != nil {
		return false
	}
	alternates := strings.Join(append([]string{c.shared}, c.alternates...), string(filepath.ListSeparator))
	code, _, err := hostGit(ctx, []string{
		"GIT_DIR=" + host,
		"GIT_OBJECT_DIRECTORY=" + filepath.Join(c.dir, "objects"),
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + alternates,
		"GIT_NO_REPLACE_OBJECTS=1",
	}, "-c", "core.commitGraph=false", "merge-base", "--is-ancestor", a, b)
	return err == nil && code == 0
}

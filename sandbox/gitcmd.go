package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/hostgit"
)

// The sandbox runs git on the host twice at most per session, both here
// and both built by package hostgit, as every git command ralph runs on
// the host is (explicit GIT_DIR, GIT_COMMON_DIR and GIT_WORK_TREE, the
// repository's programs blanked): to drop core.worktree from the private
// copy of the config (only when the config mentions it), and to tell
// whether the agent's HEAD descends from where it began.

// gitTimeout bounds a git command of the sandbox's.
const gitTimeout = time.Minute

// dropWorktreeSetting removes core.worktree from the config file at path
// (a copy of repo's): the private checkout's work tree is where its .git
// is mounted. git edits the file it is named (--file) and nothing else.
func dropWorktreeSetting(repo *hostgit.Repo, path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && !strings.Contains(strings.ToLower(string(b)), "worktree") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: private checkout: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	_, err = repo.Run(ctx, "", "config", "--file", path, "--unset-all", "core.worktree")
	var ge *hostgit.Error
	if errors.As(err, &ge) && ge.ExitCode() == 5 {
		return nil // there was no such key
	}
	if err != nil {
		return fmt.Errorf("sandbox: private checkout: %w", err)
	}
	return nil
}

// isAncestor reports whether commit a is b or an ancestor of b, reading
// the private objects and the repository's. Anything but a clear yes —
// a missing object, a git that fails or times out — is no.
//
// The private copy is the agent's, config, hooks and all, so git does not
// run in it: GIT_DIR is a directory of the sandbox's own (its config
// written here, naming no program), and the copy's objects are read as
// data through GIT_OBJECT_DIRECTORY — what hostgit blanks is then
// nothing the agent wrote; it is the same command builder all the same.
//
// The agent writes the private objects/info: a commit-graph there could
// claim any parents for its commits, so git reads none
// (core.commitGraph=false) and walks the commits themselves.
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
	cmd, err := hostgit.Private(host, host).Command(ctx, "", "-c", "core.commitGraph=false", "merge-base", "--is-ancestor", a, b)
	if err != nil {
		return false
	}
	alternates := strings.Join(append([]string{c.shared}, c.alternates...), string(filepath.ListSeparator))
	cmd.Env = append(cmd.Env,
		"GIT_OBJECT_DIRECTORY="+filepath.Join(c.dir, "objects"),
		"GIT_ALTERNATE_OBJECT_DIRECTORIES="+alternates,
		"GIT_NO_REPLACE_OBJECTS=1")
	return cmd.Run() == nil
}

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// prepare makes the session's mounts in scratch and its bubblewrap
// command (see the package documentation for each one's reason):
//
//  1. the tree, writable;
//  2. the plan's .ralph/, read-only again, where it lies in the tree;
//  3. the private git checkout over the tree's .git (a directory mounted
//     writable, or a file naming it mounted read-only), the submodules'
//     git directories read-only in it, and the repository's object store
//     read-only where the copy's alternates look for it; a worker's .git whose git directory the Boundary does
//     not know is mounted over with an empty file;
//  4. the session's temp directory, writable;
//  5. each state directory: its scratch, then its real entries in it,
//     kept ones writable, the rest read-only;
//  6. the hidden files: an empty read-only file over each.
//
// A ReadOnly session gets neither 1, 2 nor 3: the tree stays as the
// read-only root shows it, its .git with it.
func (b *Boundary) prepare(s *Session, p SessionParams, scratch string) error {
	empty := filepath.Join(scratch, "empty")
	if err := os.WriteFile(empty, nil, 0o400); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	var mounts []mount
	if !p.ReadOnly {
		var err error
		if mounts, err = b.treeMounts(s, scratch, empty); err != nil {
			return err
		}
	}
	mounts = append(mounts, bind(s.TempDir, s.TempDir))

	sts, err := b.states(s.Tree, p.State)
	if err != nil {
		return err
	}
	for i, st := range sts {
		m, err := prepareState(st.State, st.dir, filepath.Join(scratch, "state-"+strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("sandbox: state directory %s: %w", st.dir, err)
		}
		mounts = append(mounts, bind(m.scratch, m.dir))
		for _, e := range m.entries {
			real := filepath.Join(m.dir, e.name)
			if e.rw {
				mounts = append(mounts, bind(real, real))
			} else {
				mounts = append(mounts, roBind(real, real))
			}
		}
	}

	for _, h := range b.hide {
		mounts = append(mounts, roBind(empty, h))
	}

	s.Path, s.Args = bwrapCommand(b.sb.Path, signalEnv(), os.Geteuid() == 0, s.Dir, mounts, p.Path, p.Args)
	return nil
}

// treeMounts are the mounts 1 to 3 of prepare, for a session that
// writes its tree.
func (b *Boundary) treeMounts(s *Session, scratch, empty string) ([]mount, error) {
	mounts := []mount{bind(s.Tree, s.Tree)}
	if within(b.plan, s.Tree) {
		mounts = append(mounts, roBind(b.plan, b.plan))
	}

	dotGit, dotGitDir, gitDir, err := b.checkoutOf(s.Tree)
	if err != nil {
		return nil, err
	}
	switch {
	case gitDir != "":
		c, err := makeCheckout(b.repo, gitDir, dotGit, dotGitDir, scratch)
		if err != nil {
			return nil, err
		}
		s.checkout = c
		inside := c.dir // where the copy is seen in the sandbox
		if dotGitDir {
			mounts = append(mounts, bind(c.dir, dotGit))
			inside = dotGit
		} else {
			mounts = append(mounts, roBind(c.gitfile, dotGit), bind(c.dir, c.dir))
		}
		if c.modules != "" {
			mounts = append(mounts, roBind(c.modules, filepath.Join(inside, "modules")))
		}
		mounts = append(mounts, roBind(c.shared, c.objects))
	case dotGit != "":
		mounts = append(mounts, roBind(empty, dotGit))
	}
	return mounts, nil
}

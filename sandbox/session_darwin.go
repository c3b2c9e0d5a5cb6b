package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
)

// prepare writes the session's sandbox-exec profile into scratch: the
// tree and the temp directory writable; the plan's .ralph/ read-only (but
// a worker's tree in it), the repository's git directories and the tree's
// .git read-only (sandbox-exec
// cannot mount a private copy: the agent's git reads but does not write);
// in the state directories, only the kept entries and the fresh ones
// writable (no scratch either); the hidden files unreadable. A ReadOnly
// session's tree is read-only too.
func (b *Boundary) prepare(s *Session, p SessionParams, scratch string) error {
	spec := profileSpec{tree: s.Tree, writable: []string{s.TempDir}, plan: b.plan, hide: b.hide}
	dotGit, _, gitDir, err := b.checkoutOf(s.Tree)
	if err != nil {
		return err
	}
	if dotGit != "" {
		spec.readOnly = append(spec.readOnly, dotGit)
	}
	if p.ReadOnly {
		spec.readOnly = append(spec.readOnly, s.Tree)
	}
	if b.repo != nil {
		spec.readOnly = append(spec.readOnly, b.repo.gitDir, b.repo.common)
	}
	if gitDir != "" {
		spec.readOnly = append(spec.readOnly, gitDir)
	}
	sts, err := b.states(s.Tree, p.State)
	if err != nil {
		return err
	}
	for _, st := range sts {
		spec.states = append(spec.states, stateMount{dir: st.dir, keep: st.Keep, fresh: st.Fresh})
	}
	f := filepath.Join(scratch, "profile.sb")
	if err := os.WriteFile(f, []byte(profile(spec)), 0o600); err != nil {
		return fmt.Errorf("sandbox: writing the profile: %w", err)
	}
	// sandbox-exec applies the profile to itself and then executes the
	// command: it keeps its pid, and signals reach it directly.
	s.Path, s.Args = b.sb.Path, append([]string{"-f", f, p.Path}, p.Args...)
	return nil
}

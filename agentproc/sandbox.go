package agentproc

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// sandboxed is one run's sandbox session and its scratch directory.
type sandboxed struct {
	sess    *sandbox.Session
	scratch string
}

// sandboxed prepares s's session in s.Sandbox, in scratch: a directory
// of its own made by TempDir with kind "sandbox", so that Sweep removes
// it if this process dies first. The caller removes scratch.
func (s Spec) sandboxed(scratch string) (*sandboxed, error) {
	sess, err := s.Sandbox.Prepare(sandbox.SessionParams{
		Dir: s.Dir, Path: s.Path, Args: s.Args, Env: s.Env, State: s.State, Scratch: scratch, ReadOnly: s.ReadOnly,
	})
	if err != nil {
		return nil, err
	}
	return &sandboxed{sess: sess, scratch: scratch}, nil
}

// checkout says how the private git checkout moved, once the agent and
// everything it started are gone; a cancelled ctx does not cut it short
// (sandbox.Session.Close bounds its own time).
func (b *sandboxed) checkout(ctx context.Context) *loop.Checkout {
	c := b.sess.Close(context.WithoutCancel(ctx))
	if c == nil {
		return nil
	}
	return &loop.Checkout{Start: c.Start, End: c.End, Descends: c.Descends}
}

// removeAll removes dir and everything in it, directories the agent made
// unwritable or unreadable included (they are made accessible first).
// Symbolic links are removed, never followed.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// TempDir makes a new directory in os.TempDir() named after this process,
// as TempFile names its files (ralph-<kind>-<pid>-<start>-<host>-<random>),
// so that Sweep removes it, whole, when this process dies before removing
// it. kind is as TempFile's.
func TempDir(kind string) (string, error) {
	if !validKind(kind) {
		return "", &os.PathError{Op: "mkdir", Path: kind, Err: os.ErrInvalid}
	}
	return os.MkdirTemp("", tempPattern(kind, "", loop.ThisProcess()))
}

// NoVerifierShell is the notice of a build whose verifier runs agent, a
// CLI with no read-only shell of its own (Gemini CLI, OpenCode), where no
// sandbox can give it one (err says why): the verifier cannot run
// commands, the tests included, and checks the work by reading it.
func NoVerifierShell(agent string, err error) string {
	return fmt.Sprintf("note: the verifier (%s) cannot run commands, the tests included: its CLI has no read-only shell, and no sandbox is available to give it one with the tree read-only (%v); it checks the work by reading it", agent, err)
}

// Boundary is the sandbox a session of req runs in (nil: none) and
// whether its tree is read-only there, for a runner whose CLI has no
// read-only shell of its own (Gemini CLI, OpenCode): a working session
// runs in box (--sandbox); a verifier session runs in box, else in
// verifierBox, with the tree read-only, so that it can run the tests but
// not write.
func Boundary(req loop.RunRequest, box, verifierBox *sandbox.Boundary) (*sandbox.Boundary, bool) {
	switch {
	case req.Sandboxed:
		return box, false
	case box != nil:
		return box, true
	case verifierBox != nil:
		return verifierBox, true
	}
	return nil, false
}

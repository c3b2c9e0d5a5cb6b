package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ralph-dev/ralph/hostgit"
)

// repository is the git repository a project is in, as found when the
// Boundary was made.
type repository struct {
	// host is the repository as package hostgit found it: the git
	// commands ralph runs for a session on the host are built from it,
	// and a worker's tree's git directory is looked up in it (Linked).
	host *hostgit.Repo
	// top is the work tree that holds the .git the project's checkout
	// uses: the project root or one of its ancestors.
	top string
	// dotGitDir says that top/.git is a directory (a main checkout);
	// otherwise it is a file naming the git directory (a linked
	// worktree, a submodule, --separate-git-dir).
	dotGitDir bool
	// gitDir is the checkout's git directory: HEAD and the index.
	gitDir string
	// common is the common git directory: objects, refs, config.
	common string
}

// dotGit is the path of the checkout's .git.
func (r *repository) dotGit() string { return filepath.Join(r.top, ".git") }

// discoverRepository finds the git repository the directory root
// (resolved) is in with hostgit.Find — the rules of git's own discovery,
// as for every git ralph runs on the host: the first .git up from root,
// a directory or a file "gitdir: PATH", the common directory its
// commondir names; GIT_CEILING_DIRECTORIES and the file system boundary
// stop it, a git directory or bare repository is none, files are read
// without blocking — and resolves the directories it names (bubblewrap
// mounts real paths). It returns nil when there is none, or when what it
// finds is not a git directory (no HEAD, objects or refs): a .git file
// that says "gitdir: /" is no repository. GIT_DIR is not considered.
func discoverRepository(root string) *repository {
	h, err := hostgit.Find(root)
	if err != nil {
		return nil
	}
	r := &repository{host: h, top: h.WorkTree}
	fi, err := os.Stat(r.dotGit())
	if err != nil {
		return nil
	}
	r.dotGitDir = fi.IsDir()
	if r.gitDir, err = filepath.EvalSymlinks(h.GitDir); err != nil {
		return nil
	}
	if r.common, err = filepath.EvalSymlinks(h.CommonDir); err != nil {
		return nil
	}
	return r
}

// worktreeGitDir returns the git directory of the linked worktree whose
// .git file is dotGit, found from the common directory's side — the
// worktrees/NAME/gitdir file that names dotGit (hostgit.Repo.Linked) —
// never from the .git file itself, which lies in the tree an agent
// writes. "" when there is none.
func (r *repository) worktreeGitDir(dotGit string) string {
	l, err := r.host.Linked(filepath.Dir(dotGit))
	if err != nil {
		return ""
	}
	dir, err := filepath.EvalSymlinks(l.GitDir)
	if err != nil {
		return ""
	}
	return dir
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// maxSmall bounds what readSmall reads: a ref, HEAD.
const maxSmall = 64 << 10

// errNotRegular is returned for a path that is not a regular file.
var errNotRegular = errors.New("not a regular file")

// readSmall reads a small regular file through open (a non-blocking
// open: a FIFO an agent planted must not hang ralph), checking that it is
// a regular file before reading it.
func readSmall(open func(string) (*os.File, error), name string) ([]byte, error) {
	f, err := open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", name, errNotRegular)
	}
	return io.ReadAll(io.LimitReader(f, maxSmall))
}

// refStore reads refs from one git directory: loose refs and packed-refs,
// each file opened through open (openNB for ralph's own directories; a
// non-blocking open under an os.Root for the agent's private one).
type refStore struct {
	open func(name string) (*os.File, error) // name relative to the git directory
}

// dirRefs reads the refs of the git directory dir, which no agent writes.
func dirRefs(dir string) refStore {
	return refStore{open: func(name string) (*os.File, error) { return openNB(filepath.Join(dir, name)) }}
}

// openNB opens name for reading without blocking on a FIFO.
func openNB(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// rootRefs reads the refs of a git directory an agent wrote, through
// root: no open leaves it, none blocks on a FIFO.
func rootRefs(root *os.Root) refStore {
	return refStore{open: func(name string) (*os.File, error) {
		return root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}}
}

// resolveHEAD returns the commit HEAD names in the git directory heads
// reads HEAD from, its refs read from refs (the common directory): a
// detached HEAD's id, or the id of the branch it is on. "" when HEAD names
// no commit (an unborn branch) or cannot be read.
func resolveHEAD(heads, refs refStore) string {
	b, err := readSmall(heads.open, "HEAD")
	if err != nil {
		return ""
	}
	content := strings.TrimSpace(string(b))
	for range 5 { // symbolic refs to symbolic refs, as git allows
		name, symbolic := strings.CutPrefix(content, "ref: ")
		if !symbolic {
			if isObjectID(content) {
				return content
			}
			return ""
		}
		name = strings.TrimSpace(name)
		if !validRefName(name) {
			return ""
		}
		if b, err := readSmall(refs.open, name); err == nil {
			content = strings.TrimSpace(string(b))
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		return refs.packed(name)
	}
	return ""
}

// packed returns name's id in packed-refs, or "".
func (s refStore) packed(name string) string {
	f, err := s.open("packed-refs")
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' || line[0] == '^' {
			continue
		}
		id, ref, ok := bytes.Cut(line, []byte{' '})
		if ok && string(ref) == name && isObjectID(string(id)) {
			return string(id)
		}
	}
	return ""
}

// validRefName accepts the names a symbolic HEAD may hold: under refs/,
// relative, without "..", empty or "." components.
func validRefName(name string) bool {
	if !strings.HasPrefix(name, "refs/") || strings.ContainsAny(name, "\x00\\") {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// isObjectID reports whether s is a full object id: 40 (SHA-1) or 64
// (SHA-256) lowercase hex digits.
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

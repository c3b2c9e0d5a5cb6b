package hostgit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors of Find and Repo.Linked.
var (
	// ErrNotRepository: the directory is in no git working tree (a plain
	// directory, a git directory, a bare repository, or no directory).
	ErrNotRepository = errors.New("hostgit: not in a git working tree")
	// ErrNotWorktree: the directory is not the top of a linked working
	// tree the repository's common directory lists, or not a real
	// directory.
	ErrNotWorktree = errors.New("hostgit: not in a working tree of the repository")
	// ErrGitTooOld: the git binary predates GIT_CONFIG_COUNT (2.31), so
	// that the programs of the repository's configuration could not be
	// blanked: no command is run.
	ErrGitTooOld = errors.New("hostgit: git 2.31 or later is needed")
)

// WaitDelay bounds how long a cancelled git may take to exit on SIGTERM
// before it is killed, and how long a cancelled or finished git may hold
// its output pipes (a child it left behind) before Wait gives up on them.
const WaitDelay = 5 * time.Second

// A Repo is one working tree of a repository, with its git directories
// fixed when it was found: commands built from it never look at a .git
// file, commondir or core.worktree again. Its methods may be called from
// several goroutines.
type Repo struct {
	// GitDir is the working tree's git directory (GIT_DIR): the
	// repository's own for the main working tree, <common>/worktrees/<name>
	// for a linked one.
	GitDir string
	// CommonDir is the repository's common directory (GIT_COMMON_DIR):
	// objects, refs, config, hooks.
	CommonDir string
	// WorkTree is the top of the working tree (GIT_WORK_TREE).
	WorkTree string
	// Bin is the git executable; "" is "git" from PATH.
	Bin string

	cfg *configCache

	// linked caches the repository's linked working trees, read from
	// <CommonDir>/worktrees/*/gitdir (see Linked).
	linkedMu sync.Mutex
	linked   map[string]*Repo // clean top → its Repo
}

// Find finds the repository whose working tree holds dir as git itself
// would when run there — the nearest .git upwards, a directory or a
// "gitdir:" file, its commondir file — from the files as they are now,
// without running git. Call it from state no agent has touched (when a
// run starts); the Repo it returns keeps those directories.
//
// It stops where git's discovery stops: at a git directory or bare
// repository (dir inside one is no working tree: ErrNotRepository), at
// GIT_CEILING_DIRECTORIES, and at a file system boundary unless
// GIT_DISCOVERY_ACROSS_FILESYSTEM is set. The files it reads (a .git
// file, commondir) are opened without blocking and read only when they
// are regular files: a FIFO planted for one hangs nothing. The sandbox
// finds the repository with it too, so that the boundary and ralph's git
// agree on which repository a project is in. git's ownership check
// (safe.directory) does not apply: it guards against programs a
// stranger's configuration names, which Command blanks whoever owns the
// repository.
func Find(dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotRepository, dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is no directory", ErrNotRepository, dir)
	}
	ceilings := ceilingDirs()
	across := boolEnv("GIT_DISCOVERY_ACROSS_FILESYSTEM")
	dev := devOf(fi)
	for d := abs; ; {
		dotgit := filepath.Join(d, ".git")
		if li, err := os.Lstat(dotgit); err == nil {
			gitDir, common, err := resolveDotGit(dotgit, li)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrNotRepository, dir, err)
			}
			if gitDir != "" {
				return newRepo(gitDir, common, d), nil
			}
		}
		if isGitDir(d) {
			return nil, fmt.Errorf("%w: %s is inside a git directory or bare repository", ErrNotRepository, dir)
		}
		up := filepath.Dir(d)
		if up == d || slices.Contains(ceilings, up) {
			break
		}
		if !across {
			ui, err := os.Stat(up)
			if err != nil || devOf(ui) != dev {
				break
			}
		}
		d = up
	}
	return nil, fmt.Errorf("%w: %s", ErrNotRepository, dir)
}

// Private is a git directory ralph made and keeps itself (the verifier's
// snapshot store), with workTree as its working tree: its own common
// directory, no commondir file read.
func Private(gitDir, workTree string) *Repo {
	return newRepo(gitDir, gitDir, workTree)
}

func newRepo(gitDir, common, workTree string) *Repo {
	return &Repo{GitDir: filepath.Clean(gitDir), CommonDir: filepath.Clean(common), WorkTree: filepath.Clean(workTree),
		cfg: &configCache{}}
}

// WithWorkTree is r with another working tree (the tree guard lists a
// nested directory with its private store); it shares r's configuration
// cache, as the git directories are the same.
func (r *Repo) WithWorkTree(dir string) *Repo {
	return &Repo{GitDir: r.GitDir, CommonDir: r.CommonDir, WorkTree: filepath.Clean(dir), Bin: r.Bin, cfg: r.cfg}
}

// Linked returns the linked working tree of r's repository whose top is
// dir, found from <CommonDir>/worktrees/*/gitdir — the record git keeps
// of its linked trees in the common directory — never from the .git file
// in dir, which an agent can rewrite. dir must be that top (given as git
// recorded it, or through symlinks in the directories above it) and a
// real directory, not a link: a tree an agent replaced by a link to
// another checkout is ErrNotWorktree, so that git never works on what the
// link points at. The record counts only where its directory
// (<CommonDir>/worktrees/<name>) is a real directory holding a HEAD and a
// gitdir that is a regular file (read without blocking: a FIFO planted
// there does not hang ralph). It never answers with r's own working tree.
//
// This is the one answer to "which git directory is this worker's tree's"
// for every caller: the verifier's guard, parallel's git and its check of
// a worker's tree (parallel.ExecGit.CheckWorktree), and the sandbox's
// private checkout of a worker's tree.
func (r *Repo) Linked(dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	abs = filepath.Clean(abs)
	if fi, err := os.Lstat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is no real directory", ErrNotWorktree, dir)
	}
	names := []string{abs}
	if up, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		if alt := filepath.Join(up, filepath.Base(abs)); alt != abs {
			names = append(names, alt)
		}
	}
	for _, reload := range []bool{false, true} {
		if l := r.findLinked(names, reload); l != nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNotWorktree, dir)
}

// findLinked looks the names up among the linked working trees, reading
// them again first when reload is set (a worktree added since).
func (r *Repo) findLinked(names []string, reload bool) *Repo {
	r.linkedMu.Lock()
	defer r.linkedMu.Unlock()
	if r.linked == nil || reload {
		r.linked = r.readLinked()
	}
	for _, n := range names {
		if l, ok := r.linked[n]; ok {
			if !reload {
				// A tree removed and made again may have another admin
				// directory, and an admin directory another tree.
				if top, ok := linkedTop(l.GitDir); !ok || top != n {
					return nil
				}
			}
			return l
		}
	}
	return nil
}

// isMainTree reports whether top is r's own working tree, by its path or
// as the same directory.
func (r *Repo) isMainTree(top string) bool {
	if r.WorkTree == "" {
		return false
	}
	if top == r.WorkTree {
		return true
	}
	a, err1 := os.Stat(top)
	b, err2 := os.Stat(r.WorkTree)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// readLinked reads <CommonDir>/worktrees/*/gitdir: each names its tree's
// .git file. Trees are keyed by their path as git wrote it.
func (r *Repo) readLinked() map[string]*Repo {
	out := map[string]*Repo{}
	entries, err := os.ReadDir(filepath.Join(r.CommonDir, "worktrees"))
	if err != nil {
		return out
	}
	for _, e := range entries {
		if !e.IsDir() { // a link is no directory here
			continue
		}
		admin := filepath.Join(r.CommonDir, "worktrees", e.Name())
		top, ok := linkedTop(admin)
		if !ok || r.isMainTree(top) {
			continue // a record naming the main tree is no linked tree's
		}
		old, ok := r.linked[top]
		if ok && old.GitDir == admin {
			out[top] = old // keep its configuration cache
			continue
		}
		l := newRepo(admin, r.CommonDir, top)
		l.Bin = r.Bin
		out[top] = l
	}
	return out
}

// linkedTop is the top of the linked tree whose admin directory (in
// <common>/worktrees) is admin, as its gitdir file records it; ok is
// false when admin is no real directory, or has no HEAD or no gitdir
// regular file.
func linkedTop(admin string) (top string, ok bool) {
	if fi, err := os.Lstat(admin); err != nil || !fi.IsDir() {
		return "", false
	}
	if fi, err := os.Stat(filepath.Join(admin, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	b, err := readSmall(filepath.Join(admin, "gitdir"))
	if err != nil {
		return "", false
	}
	p := strings.TrimSpace(string(b))
	if p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(admin, p)
	}
	return filepath.Dir(filepath.Clean(p)), true
}

// maxSmall bounds what readSmall reads: a .git file, commondir, gitdir.
const maxSmall = 64 << 10

// readSmall reads the small regular file name, opened without blocking (a
// FIFO an agent planted must not hang ralph) and refused unless it is a
// regular file.
func readSmall(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return io.ReadAll(io.LimitReader(f, maxSmall))
}

// resolveDotGit reads a .git entry: a directory is the git directory, a
// file names it ("gitdir: <path>", relative to the file's directory).
// gitDir "" means the entry is no repository (git goes on upwards then).
func resolveDotGit(dotgit string, fi os.FileInfo) (gitDir, common string, err error) {
	switch {
	case fi.IsDir():
		gitDir = dotgit
	case fi.Mode().IsRegular():
		b, err := readSmall(dotgit)
		if err != nil {
			return "", "", err
		}
		p, ok := strings.CutPrefix(string(b), "gitdir: ")
		if !ok {
			return "", "", fmt.Errorf("%s: not a gitdir file", dotgit)
		}
		p = strings.TrimRight(p, "\r\n")
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(dotgit), p)
		}
		gitDir = filepath.Clean(p)
		if !isGitDir(gitDir) {
			return "", "", fmt.Errorf("%s: %s is no git directory", dotgit, gitDir)
		}
	default:
		// A symlink .git: git follows it like a directory.
		if st, err := os.Stat(dotgit); err == nil && st.IsDir() {
			gitDir = dotgit
		}
	}
	if gitDir == "" || !isGitDir(gitDir) {
		return "", "", nil
	}
	common = gitDir
	if b, err := readSmall(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimRight(string(b), "\r\n")
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		common = filepath.Clean(c)
	}
	return gitDir, common, nil
}

// isGitDir is git's is_git_directory, near enough: a HEAD, and objects
// and refs here or in the directory commondir names.
func isGitDir(d string) bool {
	if fi, err := os.Stat(filepath.Join(d, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	base := d
	if b, err := readSmall(filepath.Join(d, "commondir")); err == nil {
		c := strings.TrimRight(string(b), "\r\n")
		if !filepath.IsAbs(c) {
			c = filepath.Join(d, c)
		}
		base = c
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(base, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

func ceilingDirs() []string {
	var out []string
	for _, p := range filepath.SplitList(os.Getenv("GIT_CEILING_DIRECTORIES")) {
		if filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}

func boolEnv(k string) bool {
	switch strings.ToLower(os.Getenv(k)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// Command returns git with args, to run in dir (a directory of the
// working tree; "" is its top), with the environment Env describes. The
// caller sets Stdin, Stdout and Stderr, may add to Env (a later entry
// wins), and runs it. A cancelled ctx stops git with SIGTERM, on which it
// removes its lock files; WaitDelay bounds the rest.
//
// An error is the configuration that could not be read (no git, a
// broken config file, a git older than 2.31).
func (r *Repo) Command(ctx context.Context, dir string, args ...string) (*exec.Cmd, error) {
	bin, err := r.bin()
	if err != nil {
		return nil, err
	}
	env, ov, err := r.env(ctx)
	if err != nil {
		return nil, err
	}
	args = packPrograms(args, ov)
	if dir == "" {
		dir = r.WorkTree
	}
	cmd := gitCommand(ctx, bin, append([]string{"--no-pager"}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	return cmd, nil
}

// gitCommand is bin with args, stopped as the package documentation says
// ("Cancellation"): SIGTERM when ctx is done, SIGKILL WaitDelay later.
func gitCommand(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = WaitDelay
	return cmd
}

// Run runs git with args in dir and returns its standard output. A
// failure is an *Error.
func (r *Repo) Run(ctx context.Context, dir string, args ...string) (string, error) {
	cmd, err := r.Command(ctx, dir, args...)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &Error{Args: args, Err: err, Stderr: stderr.String()}
	}
	return stdout.String(), nil
}

// An Error is a git command Run ran that failed.
type Error struct {
	Args   []string
	Err    error // an *exec.ExitError, or why git did not run
	Stderr string
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	s := "git " + subcommand(e.Args) + ": " + e.Err.Error()
	if msg != "" {
		s += ": " + msg
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode is git's exit status, -1 when it did not exit.
func (e *Error) ExitCode() int {
	var ee *exec.ExitError
	if errors.As(e.Err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// subcommand is the first argument that is no option (nor -c's value).
func subcommand(args []string) string {
	if i := subcommandIndex(args); i >= 0 {
		return args[i]
	}
	return ""
}

func subcommandIndex(args []string) int {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-c" || args[i] == "-C":
			i++
		case !strings.HasPrefix(args[i], "-"):
			return i
		}
	}
	return -1
}

// bin is the git executable to run, checked once per path for a version
// that reads GIT_CONFIG_COUNT.
func (r *Repo) bin() (string, error) {
	name := r.Bin
	if name == "" {
		name = "git"
	}
	v, _ := versions.LoadOrStore(name, &versionCheck{})
	c := v.(*versionCheck)
	c.once.Do(func() { c.path, c.err = checkVersion(name) })
	return c.path, c.err
}

type versionCheck struct {
	once sync.Once
	path string
	err  error
}

var versions sync.Map // name → *versionCheck

func checkVersion(name string) (string, error) {
	path, err := lookPath(name)
	if err != nil {
		return "", err
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	cmd := exec.Command(path, "version")
	cmd.Env = cleanEnv(os.Environ())
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hostgit: %s version: %w", path, err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(string(out)), "git version "), "%d.%d", &major, &minor); err != nil {
		return "", fmt.Errorf("hostgit: %s version: cannot read %q", path, out)
	}
	if major < 2 || major == 2 && minor < 31 {
		return "", fmt.Errorf("%w (%s is %d.%d)", ErrGitTooOld, path, major, minor)
	}
	return path, nil
}

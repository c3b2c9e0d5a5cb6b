package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A Boundary is what the sandbox lets the agents and commands of one
// project write, decided once, when it is made — before the first agent
// starts — from what ralph itself knows: the project root, the git
// repository found there, and the directory where ralph makes the
// workers' trees. Nothing a sandboxed agent can write is read again to
// decide it: a session never grants a path because a .git file, a
// commondir or a gitdir: line names it (see the package documentation).
//
// Make one with Sandbox.Boundary and start each agent or command with
// Prepare. A Boundary holds no state of a session and is safe for
// concurrent use.
type Boundary struct {
	sb *Sandbox
	// root is the project root, resolved.
	root string
	// plan is <root>/.ralph, resolved; it always exists (Boundary makes
	// it), so that it is read-only in every session.
	plan string
	// trees is where the workers' trees lie: each of its subdirectories
	// is a tree an agent may write.
	trees string
	// repo is the repository the project is in (nil: none).
	repo *repository
	// hide are the files that sandboxed sessions see empty.
	hide []string
}

// BoundaryParams say what a Boundary is made from.
type BoundaryParams struct {
	// Root is the project root (required): the tree an agent working in
	// the project writes, with its .ralph/ read-only inside it.
	Root string
	// Worktrees is the directory in which ralph makes the workers' trees
	// (a parallel build's .ralph/worktrees): an agent whose working
	// directory is in one of its subdirectories writes that one instead
	// of Root. Empty means <Root>/.ralph/worktrees.
	Worktrees string
	// Env is the environment that says where the credential files are
	// (HOME, PGPASSFILE, PGSERVICEFILE, XDG_CONFIG_HOME, GH_CONFIG_DIR);
	// nil means os.Environ().
	Env []string
	// Hide lists more files that sandboxed sessions see empty, besides
	// HiddenFiles'.
	Hide []string
}

// Boundary decides what sessions of the project at p.Root may write (see
// Boundary). It makes <Root>/.ralph (mode 0755) when it is missing — a
// first sandboxed run in a fresh project, over a progress file — so that
// it can be made read-only: a .ralph/ the first agent made would be
// writable for the whole run. It fails when Root is not a directory, or
// when its .ralph is not one.
func (s *Sandbox) Boundary(p BoundaryParams) (*Boundary, error) {
	if p.Root == "" {
		return nil, errors.New("sandbox: the project root is required")
	}
	root, err := resolve(p.Root)
	if err != nil {
		return nil, fmt.Errorf("sandbox: project root: %w", err)
	}
	if !isDir(root) {
		return nil, fmt.Errorf("sandbox: project root %s is not a directory", root)
	}
	b := &Boundary{sb: s, root: root, repo: discoverRepository(root)}
	dotRalph := filepath.Join(root, ".ralph")
	if err := os.Mkdir(dotRalph, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if b.plan, err = filepath.EvalSymlinks(dotRalph); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if !isDir(b.plan) {
		return nil, fmt.Errorf("sandbox: %s is not a directory", dotRalph)
	}
	trees := p.Worktrees
	if trees == "" {
		trees = filepath.Join(root, ".ralph", "worktrees")
	}
	if b.trees, err = resolveMissing(trees); err != nil {
		return nil, fmt.Errorf("sandbox: worktrees: %w", err)
	}
	env := p.Env
	if env == nil {
		env = os.Environ()
	}
	for _, h := range append(HiddenFiles(root, env), p.Hide...) {
		if r, err := filepath.EvalSymlinks(h); err == nil && isFile(r) && !slices.Contains(b.hide, r) {
			b.hide = append(b.hide, r)
		}
	}
	return b, nil
}

// Root returns the project root the Boundary was made for, resolved.
func (b *Boundary) Root() string { return b.root }

// HiddenFiles returns the credential files a sandboxed session sees
// empty, for the project at root and the environment env: the plan's
// database settings (.ralph/db.json), PostgreSQL's password and service
// files (~/.pgpass, $PGPASSFILE, ~/.pg_service.conf, $PGSERVICEFILE), and
// the GitHub tokens that git and gh keep: git's credential store
// (~/.git-credentials, and $XDG_CONFIG_HOME/git/credentials, by default
// ~/.config/git/credentials) and gh's hosts.yml (in $GH_CONFIG_DIR, in
// $XDG_CONFIG_HOME/gh and in ~/.config/gh: each that is set). GH_TOKEN,
// GITHUB_TOKEN, GH_ENTERPRISE_TOKEN and GITHUB_ENTERPRISE_TOKEN are
// withheld from the environment by the caller (agentproc.Withheld).
// Those that do not exist are skipped when the Boundary is made; relative
// paths in env are ignored.
func HiddenFiles(root string, env []string) []string {
	out := []string{filepath.Join(root, ".ralph", "db.json")}
	home := getenv(env, "HOME")
	if home != "" {
		out = append(out,
			filepath.Join(home, ".pgpass"),
			filepath.Join(home, ".pg_service.conf"),
			filepath.Join(home, ".git-credentials"),
			filepath.Join(home, ".config", "git", "credentials"),
			filepath.Join(home, ".config", "gh", "hosts.yml"))
	}
	for _, k := range []string{"PGPASSFILE", "PGSERVICEFILE"} {
		if v := getenv(env, k); v != "" && filepath.IsAbs(v) {
			out = append(out, v)
		}
	}
	if xdg := getenv(env, "XDG_CONFIG_HOME"); xdg != "" && filepath.IsAbs(xdg) {
		out = append(out, filepath.Join(xdg, "git", "credentials"), filepath.Join(xdg, "gh", "hosts.yml"))
	}
	if gh := getenv(env, "GH_CONFIG_DIR"); gh != "" && filepath.IsAbs(gh) {
		out = append(out, filepath.Join(gh, "hosts.yml"))
	}
	return out
}

// State is a directory an agent CLI keeps its own state in — its
// settings, logins, history (~/.claude, ~/.codex, …) — which it must be
// able to write, but out of which nothing the agent wrote may be carried
// into a later session that is not sandboxed: settings that name hooks,
// MCP servers, plugins and instructions files all live there. So the
// agent gets a scratch directory of its own at Dir, in which Dir's
// entries appear: read-only (directories, and files of more than 1 MiB),
// or as copies (smaller files); new files land in the scratch, and all of
// it is gone when the session ends. Only the entries Keep names are the
// real ones, writable in place: the CLI's logins, so that a refreshed
// token is kept.
type State struct {
	// Dir is the directory (absolute). A missing one is made (mode 0700)
	// before the session: the agent could not make it inside.
	Dir string
	// Keep are names of entries of Dir that stay the real ones and
	// writable (credential files). A kept file that does not exist when
	// the session starts is not kept: what the agent writes under its
	// name is scratch.
	Keep []string
	// Fresh are names (path.Match patterns) of entries of Dir the agent
	// does not see at all, so that the CLI makes them anew in the
	// scratch: databases and logs it writes as it runs.
	Fresh []string
}

// SessionParams is one command to run in the sandbox.
type SessionParams struct {
	// Dir is the working directory: the project root (or a directory in
	// it, .ralph/ excluded), or a directory in one of the workers' trees.
	// It decides which tree is writable.
	Dir string
	// Path and Args are the command (Path absolute; Args without the
	// program name).
	Path string
	Args []string
	// Env is the command's environment; Session.Env is it as the session
	// needs it (see Prepare).
	Env []string
	// State are the agent's state directories (none for a command that
	// is not an agent: a test gate, --setup).
	State []State
	// Scratch is a new directory of the caller's (in the temp
	// directory, outside every tree and state directory) where the
	// session keeps what it makes: the private git metadata, the
	// command's temp directory, the state directories' scratch. It may
	// hold the caller's own entries named ralph-* (agentproc's broker
	// socket), which the session neither uses nor shows writable. The
	// caller removes it after Close.
	Scratch string
	// ReadOnly makes the tree read-only too (a verifier's session, which
	// runs commands but must not change what it checks): the session
	// writes only its temp directory and its state directories' scratch
	// (and kept login files), gets no private git checkout (the tree's
	// own .git is read-only with the rest: git status, diff and log
	// work; commit does not), and Env sends the build output that test
	// commands would write into the tree to the temp directory
	// (ReadOnlyEnv).
	ReadOnly bool
}

// Session is a prepared sandboxed command: run Path with Args (for
// exec.Command(Path, Args...)) in Dir with Env, then call Close.
type Session struct {
	Path string
	Args []string
	// Env is SessionParams.Env with TMPDIR (and TMP and TEMP, where set)
	// naming the session's own temp directory, and without git's location
	// variables (GIT_DIR, GIT_WORK_TREE, GIT_COMMON_DIR, GIT_INDEX_FILE,
	// GIT_OBJECT_DIRECTORY, GIT_ALTERNATE_OBJECT_DIRECTORIES): the private
	// checkout is where the tree expects it.
	Env []string
	// Dir is the working directory, resolved.
	Dir string
	// Tree is the tree the session writes.
	Tree string
	// TempDir is the command's own temp directory.
	TempDir string

	checkout *privateCheckout
}

// Checkout is where the session's private git checkout started and ended
// (loop.Checkout's fields).
type Checkout struct {
	// Start is the commit HEAD named when the session began ("" when it
	// named none: an unborn branch).
	Start string
	// End is the commit the private HEAD named when the session ended ("" when
	// it named none, or one that could not be read).
	End string
	// Descends says that End is Start or a descendant of it.
	Descends bool
}

// Close ends the session once its command has exited, and everything it
// started: it says how the private checkout moved (nil when the session
// had none), reading the agent's HEAD and objects as data — no program
// the private metadata names is run. It removes nothing: the caller
// removes Scratch.
func (s *Session) Close(ctx context.Context) *Checkout {
	if s.checkout == nil {
		return nil
	}
	return s.checkout.finish(ctx)
}

// Prepare readies a session in the Boundary: it checks the working
// directory, makes the private git checkout, the temp directory and the
// state directories' scratch in p.Scratch, and returns the command that
// runs p.Path in the sandbox. It fails when p.Dir is neither in the
// project nor in a worker's tree, or is in .ralph/ elsewhere.
func (b *Boundary) Prepare(p SessionParams) (*Session, error) {
	if p.Scratch == "" || !filepath.IsAbs(p.Scratch) {
		return nil, errors.New("sandbox: an absolute scratch directory is required")
	}
	scratch, err := filepath.EvalSymlinks(p.Scratch)
	if err != nil {
		return nil, fmt.Errorf("sandbox: scratch: %w", err)
	}
	dir := p.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	if dir, err = resolve(dir); err != nil {
		return nil, fmt.Errorf("sandbox: working directory: %w", err)
	}
	if !isDir(dir) {
		return nil, fmt.Errorf("sandbox: working directory %s is not a directory", dir)
	}
	tree, err := b.tree(dir)
	if err != nil {
		return nil, err
	}
	if within(scratch, tree) {
		return nil, fmt.Errorf("sandbox: the scratch directory %s lies in the tree %s", scratch, tree)
	}
	s := &Session{Dir: dir, Tree: tree, TempDir: filepath.Join(scratch, "tmp")}
	if err := os.Mkdir(s.TempDir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s.Env = sessionEnv(p.Env, s.TempDir)
	if p.ReadOnly {
		s.Env = ReadOnlyEnv(s.Env, s.TempDir)
	}
	if err := b.prepare(s, p, scratch); err != nil {
		return nil, err
	}
	return s, nil
}

// tree returns the tree a session working in dir writes: the project
// root, or the worker's tree dir is in.
func (b *Boundary) tree(dir string) (string, error) {
	if within(dir, b.trees) && dir != b.trees {
		rel, _ := filepath.Rel(b.trees, dir)
		name, _, _ := strings.Cut(rel, string(filepath.Separator))
		return filepath.Join(b.trees, name), nil
	}
	if within(dir, b.root) && !within(dir, b.plan) && !within(dir, filepath.Join(b.root, ".ralph")) {
		return b.root, nil
	}
	return "", fmt.Errorf("sandbox: %s is neither in the project %s nor in one of its workers' trees (%s)", dir, b.root, b.trees)
}

// gitLocationVars are git's variables that name where a repository's
// metadata is; a sandboxed session goes without them.
var gitLocationVars = []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES"}

// sessionEnv is env without git's location variables and with the temp
// directory variables naming tmp.
func sessionEnv(env []string, tmp string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range withoutGitLocation(env) {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "TMPDIR":
		case "TMP", "TEMP":
			out = append(out, k+"="+tmp)
		default:
			out = append(out, kv)
		}
	}
	return append(out, "TMPDIR="+tmp)
}

// ReadOnlyEnv returns env for a command that runs in a read-only tree
// with tmp as its temp directory: the build output and caches that the
// common test commands write into the project's tree, or into the home
// directory (read-only in the sandbox), go to tmp or are not written:
//
//   - PYTHONDONTWRITEBYTECODE=1: no __pycache__ directories;
//   - PYTEST_ADDOPTS gets "-p no:cacheprovider": no .pytest_cache;
//   - CARGO_TARGET_DIR=tmp/cargo-target: cargo builds there, not in
//     target/;
//   - GOCACHE=tmp/go-build: go's build cache (in the home directory)
//     must be writable for go build and go test to run at all.
//
// Each starts empty: a verifier's build is a cold one. Other tools that
// write into the tree (a Makefile's objects, node_modules/.cache, a
// Gradle build/) fail with "Read-only file system", which the agent sees
// and can report. Bubblewrap before 0.11 has no overlay mount, and a bind
// of a scratch directory over an ignored build directory needs a mount
// point that exists (a read-only tree cannot get one for a directory not
// built yet) and would hide the build output that is there: so ralph
// redirects rather than mounts.
func ReadOnlyEnv(env []string, tmp string) []string {
	out := make([]string, 0, len(env)+4)
	addopts := "-p no:cacheprovider"
	for _, kv := range env {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "PYTHONDONTWRITEBYTECODE", "CARGO_TARGET_DIR", "GOCACHE":
		case "PYTEST_ADDOPTS":
			if strings.TrimSpace(v) != "" {
				addopts = v + " " + addopts
			}
		default:
			out = append(out, kv)
		}
	}
	return append(out, "PYTHONDONTWRITEBYTECODE=1", "PYTEST_ADDOPTS="+addopts,
		"CARGO_TARGET_DIR="+filepath.Join(tmp, "cargo-target"), "GOCACHE="+filepath.Join(tmp, "go-build"))
}

// withoutGitLocation is env without git's location variables.
func withoutGitLocation(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(gitLocationVars, k) {
			out = append(out, kv)
		}
	}
	return out
}

// resolve makes p absolute and follows its symbolic links.
func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// resolveMissing resolves p, whose last components may not exist yet:
// the longest existing prefix is resolved and the rest joined to it.
func resolveMissing(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for cur := abs; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

// within reports whether path is dir or lies below it; both are clean
// and absolute.
func within(path, dir string) bool {
	if path == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(path, dir+"/")
}

// getenv returns key's value in env, the last one when it is there more
// than once (as exec.Cmd would pass it), or "".
func getenv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
)

// Errors of the verifier's tree guard (see the package doc, "Verification").
var (
	// ErrVerifyNeedsGit: Verify is on but no git binary is on PATH. The
	// run stops before its first iteration: a verifier whose writes
	// cannot be undone is not run.
	ErrVerifyNeedsGit = fmt.Errorf("%w: verify needs git on PATH to snapshot and restore the working tree", ErrConfig)
	// ErrVerifyRestore: the verifier changed files and ralph could not put
	// them back. The run stops: a tree ralph cannot vouch for must not be
	// built on. The wrapping message names the paths.
	ErrVerifyRestore = errors.New("loop: could not restore the files the verifier changed")
	// ErrVerifySnapshot: the working tree could not be snapshotted before
	// the verifier session (so the verifier is not run).
	ErrVerifySnapshot = errors.New("loop: could not snapshot the working tree before verification")
)

// LogVerify is the kind of the task log entry written when a verifier
// changed files (which were restored and its verdict not counted).
const LogVerify = "verify"

// snapshotDir is the guard's private git directory, under <root>/.ralph.
const snapshotDir = "verify-snapshot.git"

// maxRestoreRounds bounds the restore-and-check rounds: a second round is
// needed when the verifier changed an ignore file, so that files it had
// hidden become visible once the file is back.
const maxRestoreRounds = 3

// changedPathsShown caps the paths a message names.
const changedPathsShown = 10

// treeGuard undoes what a verifier session wrote to the working tree.
//
// The protected set is what git would call the working tree's content:
// every file the project's repository tracks under root, and every
// untracked file it does not ignore (.gitignore files at every level,
// .git/info/exclude, core.excludesFile), found with the project's own git
// (`ls-files --cached --others --exclude-standard`, read-only); in a
// directory that is no git work tree the same rules are applied by the
// guard's private repository. Nested repositories and submodules are
// listed by their own git, recursively. <root>/.ralph and every .git are
// left out. Regular files and symlinks count; other file types do not.
//
// The set is hashed into a private git directory (<root>/.ralph/
// verify-snapshot.git, with an index of its own used as a stat cache, so
// only files whose stat data changed are read again) and written as a
// tree object: one id for the whole tree. After the session the same is
// done again; equal ids mean nothing changed. Otherwise `git diff-tree`
// names the changes, added files are removed (and the directories that
// held only them), and `git read-tree` + `git checkout-index` write the
// changed and deleted files back with their modes. The project's own
// repository, index and objects are never written.
type treeGuard struct {
	git   string // absolute path of the git binary
	root  string // the working tree
	dir   string // the private git directory
	index string // this run's index file in dir (the stat cache)
	env   []string
}

// gitFreeEnv is the environment without the variables that would point
// git at another repository, index or object store, or change how it reads
// pathspecs or attributes; the user's configuration (HOME,
// GIT_CONFIG_GLOBAL, …) stays, for core.excludesFile.
func gitFreeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(relocatingGitVars, k) {
			env = append(env, kv)
		}
	}
	// Optional locks off: listing the project's files never refreshes or
	// rewrites its index.
	return append(env, "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
}

var relocatingGitVars = []string{
	"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
	"GIT_PREFIX", "GIT_QUARANTINE_PATH", "GIT_IMPLICIT_WORK_TREE",
	"GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_GRAFT_FILE",
	"GIT_REPLACE_REF_BASE", "GIT_NO_REPLACE_OBJECTS", "GIT_ATTR_SOURCE",
	"GIT_LITERAL_PATHSPECS", "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS",
	"GIT_ICASE_PATHSPECS", "GIT_OPTIONAL_LOCKS", "GIT_TERMINAL_PROMPT",
}

// privateConfig is given with -c to every command on the private
// repository, over whatever the user's global config says: content is
// stored byte for byte, modes and symlinks are recorded, and nothing runs
// in the background.
var privateConfig = []string{
	"core.autocrlf=false",
	"core.safecrlf=false",
	"core.filemode=true",
	"core.symlinks=true",
	"core.fsmonitor=false",
	"core.untrackedCache=false",
	"core.sparseCheckout=false",
	"core.splitIndex=false",
	"core.checkStat=default",
	"core.looseCompression=1",
	// Every blob over a byte goes into a pack, one per command: a first snapshot of
	// 10,000 files writes two files, not 10,000 (4.8 s against 1.3 s on
	// a slow disk); packs are merged when a run ends.
	"core.bigFileThreshold=1",
	"pack.compression=1",
	"repack.writeBitmaps=false",
	"gc.auto=0",
}

// maxPacks is how many packs the private repository may hold when a run
// ends before they are merged into one.
const maxPacks = 16

// privateAttributes switches off every conversion the project's
// .gitattributes could ask for (line endings, filters such as LFS, ident,
// encodings): info/attributes takes precedence over them.
const privateAttributes = "* -text -filter -ident -working-tree-encoding\n"

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// newTreeGuard finds git and prepares the private repository under
// <root>/.ralph. The index file is this run's own (named after agentID),
// seeded from the one the last run left, so that runs sharing a tree never
// contend for a lock and a killed run's lock never blocks the next.
func newTreeGuard(ctx context.Context, root, agentID string) (*treeGuard, error) {
	return newTreeGuardIn(ctx, root, filepath.Join(root, ".ralph", snapshotDir), agentID)
}

// newTreeGuardIn is newTreeGuard with the private repository at dir: a
// worker's tree keeps it outside the tree (.ralph/worktrees/wK.verify.git
// under the project), where the clean that readies the tree for each
// attempt does not reach it.
func newTreeGuardIn(ctx context.Context, root, dir, agentID string) (*treeGuard, error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrVerifyNeedsGit, err)
	}
	if abs, err := filepath.Abs(gitPath); err == nil {
		gitPath = abs
	}
	g := &treeGuard{
		git:   gitPath,
		root:  root,
		dir:   dir,
		index: filepath.Join(dir, "index-"+unsafeName.ReplaceAllString(agentID, "_")),
		env:   gitFreeEnv(),
	}
	if err := g.init(ctx); err != nil {
		return nil, err
	}
	// A lock on this run's own index can only be a leftover.
	os.Remove(g.index + ".lock")
	if err := copyFile(filepath.Join(dir, "index"), g.index); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.Remove(g.index) // a cache: start cold
	}
	return g, nil
}

// init makes the private repository if it is not there and writes its
// attributes and excludes.
func (g *treeGuard) init(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(g.dir, "HEAD")); err != nil {
		if err := os.MkdirAll(filepath.Dir(g.dir), 0o755); err != nil {
			return fmt.Errorf("loop: verify snapshot: %w", err)
		}
		if _, err := g.run(ctx, g.root, nil, nil, "init", "--quiet", "--template=", "--bare", g.dir); err != nil {
			return fmt.Errorf("loop: verify snapshot: %w", err)
		}
	}
	info := filepath.Join(g.dir, "info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		return fmt.Errorf("loop: verify snapshot: %w", err)
	}
	files := map[string]string{
		filepath.Join(info, "attributes"): privateAttributes,
		filepath.Join(info, "exclude"):    "/.ralph/\n",
		// The project's git ignores the store, even where .ralph/ is not
		// ignored: an agent's `git add -A` must not commit a copy of the
		// whole tree.
		filepath.Join(g.dir, ".gitignore"): "*\n",
	}
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			return fmt.Errorf("loop: verify snapshot: %w", err)
		}
	}
	return nil
}

// rebuild throws the private repository away and makes a new one: it is a
// cache of file contents, and a damaged one (a verifier may have written
// to it: it lives in the tree) is rebuilt from the tree as it is, before
// a verifier session, never after.
func (g *treeGuard) rebuild(ctx context.Context) error {
	if err := os.RemoveAll(g.dir); err != nil {
		return fmt.Errorf("loop: verify snapshot: %w", err)
	}
	return g.init(ctx)
}

// close hands this run's stat cache to the next run. With tidy, it also
// merges the packs when there are many (keeping only what the index
// holds) and drops loose objects no index holds that are over a day old.
// Errors are ignored: the repository is a cache.
func (g *treeGuard) close(ctx context.Context, tidy bool) {
	if _, err := os.Stat(g.index); err != nil {
		return
	}
	shared := filepath.Join(g.dir, "index")
	if err := os.Rename(g.index, shared); err != nil {
		os.Remove(g.index)
		return
	}
	if !tidy {
		return
	}
	env := []string{"GIT_INDEX_FILE=" + shared}
	if packs, _ := filepath.Glob(filepath.Join(g.dir, "objects", "pack", "*.pack")); len(packs) > maxPacks {
		g.run(ctx, g.root, env, nil, g.private("repack", "-a", "-d", "-q")...)
	}
	g.run(ctx, g.root, env, nil, g.private("prune", "--expire=1.day.ago")...)
}

// copyFile copies an index file with its modification time: git tells
// racily clean entries (files changed in the instant the index was
// written) by comparing their times with the index file's, and a copy
// that looked newer would hide them.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(to, fi.ModTime(), fi.ModTime())
}

// private prefixes args with what every command on the private repository
// takes.
func (g *treeGuard) private(args ...string) []string {
	pre := make([]string, 0, 2*len(privateConfig)+2+len(args))
	for _, c := range privateConfig {
		pre = append(pre, "-c", c)
	}
	pre = append(pre, "--git-dir="+g.dir, "--work-tree="+g.root)
	return append(pre, args...)
}

// run runs git in dir with extra environment and stdin; it returns stdout,
// or an error quoting stderr.
func (g *treeGuard) run(ctx context.Context, dir string, env []string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, g.git, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), g.env...), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = gateWaitDelay
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", subcommand(args), err, tail(errb.String()))
	}
	return out.Bytes(), nil
}

// subcommand is the git command args run: the first argument that is no
// option (nor the value of -c).
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-c":
			i++
		case !strings.HasPrefix(args[i], "-"):
			return args[i]
		}
	}
	return ""
}

// pg runs a command on the private repository with this run's index.
func (g *treeGuard) pg(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	return g.run(ctx, g.root, []string{"GIT_INDEX_FILE=" + g.index}, stdin, g.private(args...)...)
}

// nulList joins paths for a -z --stdin command.
func nulList(paths []string) []byte {
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// splitNul splits -z output.
func splitNul(out []byte) []string {
	s := strings.TrimSuffix(string(out), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// snapshot records the protected files as they are now and returns the id
// of the tree that holds them.
func (g *treeGuard) snapshot(ctx context.Context) (string, error) {
	present, err := g.list(ctx)
	if err != nil {
		return "", err
	}
	out, err := g.pg(ctx, nil, "ls-files", "-z")
	if err != nil {
		return "", err
	}
	keep := make(map[string]bool, len(present))
	for _, p := range present {
		keep[p] = true
	}
	var stale []string
	for _, p := range splitNul(out) {
		if !keep[p] {
			stale = append(stale, p)
		}
	}
	if len(stale) > 0 {
		if _, err := g.pg(ctx, nulList(stale), "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return "", err
		}
	}
	if len(present) > 0 {
		// Entries whose stat data still match are not read again.
		if _, err := g.pg(ctx, nulList(present), "update-index", "--add", "--replace", "-z", "--stdin"); err != nil {
			return "", err
		}
	}
	tree, err := g.pg(ctx, nil, "write-tree")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(tree)), nil
}

// list returns the protected files that exist now, as slash-separated
// paths relative to root, sorted.
func (g *treeGuard) list(ctx context.Context) ([]string, error) {
	l := lister{g: g, dirs: map[string]bool{"": true}}
	if err := l.tree(ctx, "", true); err != nil {
		return nil, err
	}
	slices.Sort(l.files)
	return slices.Compact(l.files), nil
}

// lister walks the listings of a tree and its nested repositories.
type lister struct {
	g     *treeGuard
	files []string
	// dirs caches whether a directory (relative to root) is a real
	// directory, not a symlink to one: paths beyond a symlink are not in
	// the tree.
	dirs map[string]bool
}

// tree lists the files of the directory rel (relative to root, "" for
// root itself, else ending in "/"): with the git of the repository whose
// top it is, or, for root outside any repository, with the private one.
func (l *lister) tree(ctx context.Context, rel string, top bool) error {
	g := l.g
	abs := filepath.Join(g.root, filepath.FromSlash(rel))
	var out []byte
	var err error
	inRepo := false
	if top {
		o, err := g.run(ctx, abs, nil, nil, "rev-parse", "--is-inside-work-tree")
		inRepo = err == nil && strings.TrimSpace(string(o)) == "true"
	} else {
		// A nested directory with a .git that is not a repository's top:
		// its files are its parent repository's, listed already.
		o, err := g.run(ctx, abs, nil, nil, "rev-parse", "--show-prefix")
		if err != nil {
			return fmt.Errorf("nested repository %s: %w", strings.TrimSuffix(rel, "/"), err)
		}
		if strings.TrimSpace(string(o)) != "" {
			return nil
		}
		inRepo = true
	}
	args := []string{"ls-files", "-z", "--others", "--exclude-standard", "--", "."}
	if top {
		args = append(args, ":(exclude).ralph")
	}
	if inRepo {
		args = slices.Insert(args, 3, "--cached")
		out, err = g.run(ctx, abs, nil, nil, args...)
	} else {
		// No repository: every file not ignored, whatever the private
		// index holds (an index that does not exist is empty).
		out, err = g.run(ctx, abs, []string{"GIT_INDEX_FILE=" + filepath.Join(g.dir, "no-index")}, nil, g.private(args...)...)
	}
	if err != nil {
		return err
	}
	for _, p := range splitNul(out) {
		if err := l.add(ctx, rel, p); err != nil {
			return err
		}
	}
	return nil
}

// add classifies one listed path p of the tree at rel.
func (l *lister) add(ctx context.Context, rel, p string) error {
	full := rel + p
	if rel == "" && (full == ".ralph" || strings.HasPrefix(full, ".ralph/")) {
		return nil
	}
	if strings.Contains("/"+full, "/.git/") || strings.HasSuffix("/"+full, "/.git") {
		return nil
	}
	if strings.HasSuffix(p, "/") {
		// git shows a nested repository as a directory.
		if l.nestedRepo(full) {
			return l.tree(ctx, full, false)
		}
		return nil
	}
	if !l.realDir(path.Dir(full)) {
		return nil // beyond a symlink, or its directory is gone
	}
	fi, err := os.Lstat(filepath.Join(l.g.root, filepath.FromSlash(full)))
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return nil // tracked, but deleted
	case err != nil:
		return err
	case fi.IsDir():
		// A submodule, or a tracked file a directory replaced.
		if l.nestedRepo(full + "/") {
			return l.tree(ctx, full+"/", false)
		}
		return nil
	case fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0:
		l.files = append(l.files, full)
	}
	return nil
}

// nestedRepo reports whether dir (relative, ending in "/") holds a .git.
func (l *lister) nestedRepo(dir string) bool {
	_, err := os.Lstat(filepath.Join(l.g.root, filepath.FromSlash(dir), ".git"))
	return err == nil
}

// realDir reports whether dir (relative to root, "." for root) and every
// directory above it are directories, not symlinks.
func (l *lister) realDir(dir string) bool {
	if dir == "." || dir == "" {
		return true
	}
	if ok, seen := l.dirs[dir]; seen {
		return ok
	}
	ok := l.realDir(path.Dir(dir))
	if ok {
		fi, err := os.Lstat(filepath.Join(l.g.root, filepath.FromSlash(dir)))
		ok = err == nil && fi.IsDir()
	}
	l.dirs[dir] = ok
	return ok
}

// treeChange is one path that differs between two snapshots.
type treeChange struct {
	Path   string
	Status byte // 'A' added, 'D' deleted, 'M' modified (content or mode), 'T' type changed
}

// diff names the paths that differ between trees from and to.
func (g *treeGuard) diff(ctx context.Context, from, to string) ([]treeChange, error) {
	out, err := g.pg(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", from, to)
	if err != nil {
		return nil, err
	}
	f := splitNul(out)
	var cs []treeChange
	for i := 0; i+1 < len(f); i += 2 {
		meta := f[i]
		if len(meta) == 0 || meta[0] != ':' {
			return nil, fmt.Errorf("git diff-tree: unexpected output %q", meta)
		}
		cs = append(cs, treeChange{Path: f[i+1], Status: meta[len(meta)-1]})
	}
	return cs, nil
}

// check compares the tree with the snapshot before and, if anything
// changed, restores it. It returns what had changed (nil: nothing). An
// error means the tree could not be brought back to before; it wraps
// ErrVerifyRestore and names the paths still different.
func (g *treeGuard) check(ctx context.Context, before string) ([]treeChange, error) {
	now, err := g.snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVerifyRestore, err)
	}
	var changed []treeChange
	seen := map[string]bool{}
	for range maxRestoreRounds {
		if now == before {
			return changed, nil
		}
		cs, err := g.diff(ctx, before, now)
		if err != nil {
			return changed, fmt.Errorf("%w: %v", ErrVerifyRestore, err)
		}
		for _, c := range cs {
			if !seen[c.Path] {
				seen[c.Path] = true
				changed = append(changed, c)
			}
		}
		if err := g.restore(ctx, before, cs); err != nil {
			return changed, fmt.Errorf("%w (%s): %v", ErrVerifyRestore, changeList(cs), err)
		}
		if now, err = g.snapshot(ctx); err != nil {
			return changed, fmt.Errorf("%w (%s): %v", ErrVerifyRestore, changeList(cs), err)
		}
	}
	if now == before {
		return changed, nil
	}
	cs, err := g.diff(ctx, before, now)
	if err != nil {
		return changed, fmt.Errorf("%w: %v", ErrVerifyRestore, err)
	}
	return changed, fmt.Errorf("%w: still different after %d rounds: %s", ErrVerifyRestore, maxRestoreRounds, changeList(cs))
}

// restore undoes the changes cs from the tree before: added files go (and
// the directories that held only them), the others are written back.
func (g *treeGuard) restore(ctx context.Context, before string, cs []treeChange) error {
	var added, back []string
	for _, c := range cs {
		if c.Status == 'A' {
			added = append(added, c.Path)
		} else {
			back = append(back, c.Path)
		}
	}
	if len(added) > 0 {
		out, err := g.pg(ctx, nil, "ls-tree", "-r", "-d", "-z", "--name-only", before)
		if err != nil {
			return err
		}
		keep := map[string]bool{".": true}
		for _, d := range splitNul(out) {
			keep[d] = true
		}
		parents := map[string]bool{}
		for _, p := range added {
			if err := os.Remove(filepath.Join(g.root, filepath.FromSlash(p))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			for d := path.Dir(p); !keep[d]; d = path.Dir(d) {
				parents[d] = true
			}
		}
		// Deepest first; a directory that still holds something (ignored
		// files, say) stays.
		dirs := make([]string, 0, len(parents))
		for d := range parents {
			dirs = append(dirs, d)
		}
		slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, d := range dirs {
			os.Remove(filepath.Join(g.root, filepath.FromSlash(d)))
		}
	}
	// The index becomes the tree before; entries whose files did not
	// change keep their stat data.
	if _, err := g.pg(ctx, nil, "read-tree", "-m", before); err != nil {
		return err
	}
	if len(back) > 0 {
		if _, err := g.pg(ctx, nulList(back), "checkout-index", "--force", "-u", "-z", "--stdin"); err != nil {
			return err
		}
	}
	return nil
}

// changeList names changed paths for people, at most changedPathsShown.
func changeList(cs []treeChange) string {
	var names []string
	for i, c := range cs {
		if i == changedPathsShown {
			names = append(names, fmt.Sprintf("and %d more", len(cs)-i))
			break
		}
		p := c.Path
		if strings.ContainsAny(p, "\n\r\t,") || !isPrintable(p) {
			p = fmt.Sprintf("%q", p)
		}
		names = append(names, p)
	}
	return strings.Join(names, ", ")
}

func isPrintable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

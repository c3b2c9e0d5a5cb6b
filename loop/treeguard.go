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

	"github.com/ralph-dev/ralph/hostgit"
	"github.com/ralph-dev/ralph/safefile"
)

// Errors of the verifier's tree guard (ARCHITECTURE.md §3.6, "Verification").
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
// listed by the private repository too, with the nested directory as its
// work tree: the .gitignore files inside it and the user's
// core.excludesFile hold, and git never runs with a nested repository's
// own configuration (an agent can plant core.fsmonitor there without
// touching the project's .git). <root>/.ralph and every .git are left
// out. Regular files and symlinks count; other file types do not.
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
//
// The private directory lives where an agent can write (without
// --sandbox): before each use it is checked (inspect) — no symlink,
// device, pipe or hard-linked file anywhere in it, no hooks, alternates
// or grafts, and the files ralph wrote (HEAD, config, info/attributes,
// info/exclude, .gitignore) as ralph wrote them — and ralph reaches it
// and writes its own files into it through package safefile, from the
// project root down, never following a link.
type treeGuard struct {
	root  string        // the working tree
	base  string        // the trusted directory dir is reached from: the project root
	dir   string        // the private git directory
	index string        // this run's index file in dir (the stat cache)
	name  string        // the index's name in dir
	proj  *hostgit.Repo // the project's repository (nil: none)
	priv  *hostgit.Repo // the private directory, root as its work tree
	// meta records and restores what a verifier changes beside the
	// tree (nil: only the tree is guarded).
	meta *repoGuard
	// locate, if set, finds the tree's repository again before each
	// verification (proj and meta's repo).
	locate func() (*hostgit.Repo, error)
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

// The files ralph writes into the private directory, with their content.
var privateFiles = []struct{ name, content string }{
	{"HEAD", "ref: refs/heads/main\n"},
	{"config", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"},
	{"info/attributes", privateAttributes},
	{"info/exclude", "/.ralph/\n"},
	// The project's git ignores the store, even where .ralph/ is not
	// ignored: an agent's `git add -A` must not commit a copy of the
	// whole tree.
	{".gitignore", "*\n"},
}

// privateDirs are the directories of a new private repository.
var privateDirs = []string{"info", "objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags"}

// forbidden names in the private directory: what would make git run a
// program, read objects or history from elsewhere, or see another layout.
var forbidden = map[string]bool{
	"hooks": true, "commondir": true, "config.worktree": true, "worktrees": true, "shallow": true,
	"info/grafts": true, "objects/info/alternates": true, "objects/info/http-alternates": true,
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// newTreeGuard finds git and prepares the private repository under
// <root>/.ralph, for the repository root is in (found now). The index
// file is this run's own (named after agentID), seeded from the one the
// last run left, so that runs sharing a tree never contend for a lock and
// a killed run's lock never blocks the next.
func newTreeGuard(ctx context.Context, root, agentID string) (*treeGuard, error) {
	proj, err := hostgit.Find(root)
	if err != nil {
		proj = nil
	}
	return newTreeGuardIn(ctx, treeGuardParams{Root: root, Project: root, Dir: filepath.Join(root, ".ralph", snapshotDir), AgentID: agentID, Proj: proj})
}

// treeGuardParams say where a tree guard works.
type treeGuardParams struct {
	Root    string        // the working tree
	Project string        // the project root, below which Dir lies (trusted: the user named it)
	Dir     string        // the private repository
	AgentID string        // names this run's index
	Proj    *hostgit.Repo // the tree's repository (nil: none)
}

// newTreeGuardIn is newTreeGuard with the private repository at p.Dir and
// the tree's repository p.Proj: a worker's tree keeps it outside the
// tree (.ralph/worktrees/wK.verify.git under the project), where the
// clean that readies the tree for each attempt does not reach it.
func newTreeGuardIn(ctx context.Context, p treeGuardParams) (*treeGuard, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrVerifyNeedsGit, err)
	}
	name := "index-" + unsafeName.ReplaceAllString(p.AgentID, "_")
	g := &treeGuard{
		root:  p.Root,
		base:  p.Project,
		dir:   p.Dir,
		index: filepath.Join(p.Dir, name),
		name:  name,
		proj:  p.Proj,
		priv:  hostgit.Private(p.Dir, p.Root),
	}
	if err := g.init(); err != nil {
		return nil, err
	}
	st, err := g.open()
	if err != nil {
		return nil, fmt.Errorf("loop: verify snapshot: %w", err)
	}
	defer st.Close()
	// A lock on this run's own index can only be a leftover.
	st.Remove(name + ".lock")
	if err := copyFileIn(st, "index", name); err != nil {
		st.Remove(name) // a cache: start cold
	}
	return g, nil
}

// open opens the private directory from the project root, following no
// link on the way or at it.
func (g *treeGuard) open() (*safefile.Dir, error) {
	return safefile.OpenDir(g.base, g.dir)
}

// init makes the private repository if it is not there, or makes it
// again if inspect finds it damaged (or finds a link where it should
// be), and writes ralph's files into it. A link on the way to it is an
// error.
func (g *treeGuard) init() error {
	if bad, err := g.inspect(); err != nil || len(bad) > 0 {
		if err := g.remake(); err != nil {
			return fmt.Errorf("loop: verify snapshot: %w", err)
		}
	}
	st, err := g.open()
	if err != nil {
		return fmt.Errorf("loop: verify snapshot: %w", err)
	}
	defer st.Close()
	for _, d := range privateDirs {
		if err := st.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("loop: verify snapshot: %w", err)
		}
	}
	for _, f := range privateFiles {
		if b, err := st.ReadFile(f.name); err == nil && string(b) == f.content {
			continue
		}
		if err := st.WriteFile(f.name, []byte(f.content), 0o644); err != nil {
			return fmt.Errorf("loop: verify snapshot: %w", err)
		}
	}
	return nil
}

// remake removes whatever is at the private directory's path (a link
// itself, not what it names) and makes an empty directory there; the
// directories above it are made where missing, and one that is a link is
// an error.
func (g *treeGuard) remake() error {
	parent, err := safefile.MkdirAllDir(g.base, filepath.Dir(g.dir), 0o755)
	if err != nil {
		return err
	}
	defer parent.Close()
	name := filepath.Base(g.dir)
	if err := parent.RemoveAll(name); err != nil {
		return err
	}
	return parent.Mkdir(name, 0o755)
}

// inspect checks the private directory: err when dir is there but no
// real directory; bad names what in it git or ralph must not use (its
// path in dir and why). A missing dir is bad too (it is to be made).
func (g *treeGuard) inspect() (bad []string, err error) {
	st, err := g.open()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return []string{". (missing)"}, nil
		}
		return nil, err
	}
	defer st.Close()
	want := map[string]string{}
	for _, f := range privateFiles {
		want[f.name] = f.content
	}
	// Each directory is opened once and its entries looked at from it.
	var walk func(d *safefile.Dir, rel string)
	walk = func(d *safefile.Dir, rel string) {
		entries, err := d.ReadDir(".")
		if err != nil {
			bad = append(bad, rel+" ("+err.Error()+")")
			return
		}
		for _, e := range entries {
			n := e.Name()
			p := path.Join(rel, n)
			if rel == "." {
				p = n
			}
			fi, err := d.Lstat(n)
			switch {
			case err != nil:
				bad = append(bad, p+" ("+err.Error()+")")
			case forbidden[p]:
				bad = append(bad, p+" (not made by ralph)")
			case fi.IsDir():
				sub, err := d.OpenDir(n)
				if err != nil {
					bad = append(bad, p+" ("+err.Error()+")")
					continue
				}
				walk(sub, p)
				sub.Close()
			case !fi.Mode().IsRegular():
				bad = append(bad, p+" (a "+typeName(fi.Mode())+")")
			case hardLinked(fi):
				bad = append(bad, p+" (a hard link)")
			default:
				if c, ok := want[p]; ok {
					if b, err := d.ReadFile(n); err != nil || string(b) != c {
						bad = append(bad, p+" (changed)")
					}
				}
			}
		}
	}
	walk(st, ".")
	for _, f := range privateFiles {
		if _, err := st.Lstat(f.name); err != nil && f.name != ".gitignore" && !strings.HasPrefix(f.name, "info/") {
			bad = append(bad, f.name+" (missing)")
		}
	}
	return bad, nil
}

// sanitize removes, without following any link, what inspect found bad
// in the private directory after a verifier session, and writes ralph's
// files again: the objects the restore needs stay (if the verifier did
// not remove them), so the store is mended, not made again. It returns
// the paths it removed or wrote.
func (g *treeGuard) sanitize(bad []string) ([]string, error) {
	st, err := g.open()
	if err != nil {
		return nil, err
	}
	defer st.Close()
	own := map[string]string{}
	for _, f := range privateFiles {
		own[f.name] = f.content
	}
	var fixed []string
	var errs []error
	for _, b := range bad {
		p, _, _ := strings.Cut(b, " (")
		if p == "." {
			continue
		}
		fixed = append(fixed, p)
		if err := st.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, d := range privateDirs {
		if err := st.MkdirAll(d, 0o755); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range privateFiles {
		if b, err := st.ReadFile(f.name); err == nil && string(b) == f.content {
			continue
		}
		if err := st.WriteFile(f.name, []byte(f.content), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return fixed, errors.Join(errs...)
}

// typeName names a file's type for people.
func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// hardLinked reports whether fi has more than one name.
func hardLinked(fi fs.FileInfo) bool {
	n, ok := safefile.HardLinks(fi)
	return ok && n > 1
}

// rebuild throws the private repository away and makes a new one: it is a
// cache of file contents, and a damaged one (an agent may have written to
// it: it lives in the tree) is rebuilt from the tree as it is, before a
// verifier session, never after.
func (g *treeGuard) rebuild(ctx context.Context) error {
	if err := g.remake(); err != nil {
		return fmt.Errorf("loop: verify snapshot: %w", err)
	}
	return g.init()
}

// close hands this run's stat cache to the next run. With tidy, it also
// merges the packs when there are many (keeping only what the index
// holds) and drops loose objects no index holds that are over a day old.
// Errors are ignored: the repository is a cache.
func (g *treeGuard) close(ctx context.Context, tidy bool) {
	st, err := g.open()
	if err != nil {
		return
	}
	defer st.Close()
	if fi, err := st.Lstat(g.name); err != nil || !fi.Mode().IsRegular() {
		return
	}
	if err := st.Rename(g.name, "index"); err != nil {
		st.Remove(g.name)
		return
	}
	if bad, err := g.inspect(); !tidy || err != nil || len(bad) > 0 {
		return
	}
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(g.dir, "index")}
	if packs, _ := filepath.Glob(filepath.Join(g.dir, "objects", "pack", "*.pack")); len(packs) > maxPacks {
		g.run(ctx, g.priv, g.root, env, nil, g.private("repack", "-a", "-d", "-q")...)
	}
	g.run(ctx, g.priv, g.root, env, nil, g.private("prune", "--expire=1.day.ago")...)
}

// copyFileIn copies the index file from to to, in the private
// directory, with its modification time: git tells racily clean entries
// (files changed in the instant the index was written) by comparing
// their times with the index file's, and a copy that looked newer would
// hide them. Neither name may be a link.
func copyFileIn(st *safefile.Dir, from, to string) error {
	f, err := st.Open(from)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := st.Replace(to, 0o644, func(w *os.File) error {
		_, err := io.Copy(w, f)
		return err
	}, nil); err != nil {
		return err
	}
	return st.Chtimes(to, fi.ModTime(), fi.ModTime())
}

// private prefixes args with the configuration every command on the
// private repository takes (hostgit sets its directories).
func (g *treeGuard) private(args ...string) []string {
	pre := make([]string, 0, 2*len(privateConfig)+len(args))
	for _, c := range privateConfig {
		pre = append(pre, "-c", c)
	}
	return append(pre, args...)
}

// run runs git from repo in dir with extra environment and stdin; it
// returns stdout, or an error quoting stderr.
func (g *treeGuard) run(ctx context.Context, repo *hostgit.Repo, dir string, env []string, stdin []byte, args ...string) ([]byte, error) {
	cmd, err := repo.Command(ctx, dir, args...)
	if err != nil {
		return nil, &hostgit.Error{Args: args, Err: err}
	}
	cmd.Env = append(cmd.Env, env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, &hostgit.Error{Args: args, Err: err, Stderr: errb.String()}
	}
	return out.Bytes(), nil
}

// pg runs a command on the private repository with this run's index.
func (g *treeGuard) pg(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	return g.run(ctx, g.priv, g.root, []string{"GIT_INDEX_FILE=" + g.index}, stdin, g.private(args...)...)
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

// snapshot records the protected files as they are now and returns the id
// of the tree that holds them.
func (g *treeGuard) snapshot(ctx context.Context) (string, error) {
	if bad, err := g.inspect(); err != nil || len(bad) > 0 {
		if err == nil {
			err = fmt.Errorf("it holds what ralph did not put there: %s", strings.Join(bad, ", "))
		}
		return "", fmt.Errorf("the snapshot store %s: %w", g.dir, err)
	}
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
	for _, p := range hostgit.SplitNul(string(out)) {
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
// root itself, else ending in "/"): root with the project's git, listing
// what it tracks and what it does not ignore; a nested repository, or
// root outside any repository, with the private one and the directory as
// its work tree (what is not ignored: never the nested repository's own
// git, whose configuration an agent may have written).
func (l *lister) tree(ctx context.Context, rel string, top bool) error {
	g := l.g
	abs := filepath.Join(g.root, filepath.FromSlash(rel))
	args := []string{"ls-files", "-z", "--others", "--exclude-standard", "--", "."}
	if top {
		args = append(args, ":(exclude).ralph")
	}
	var out []byte
	var err error
	if top && g.proj != nil {
		// Optional locks off: listing never refreshes or rewrites the
		// project's index.
		args = slices.Insert(args, 3, "--cached")
		out, err = g.run(ctx, g.proj, abs, []string{"GIT_OPTIONAL_LOCKS=0"}, nil, args...)
	} else {
		// Every file not ignored, whatever the private index holds (an
		// index that does not exist is empty).
		env := []string{"GIT_INDEX_FILE=" + filepath.Join(g.dir, "no-index"), "GIT_OPTIONAL_LOCKS=0"}
		out, err = g.run(ctx, g.priv.WithWorkTree(abs), abs, env, nil, g.private(args...)...)
	}
	if err != nil {
		if !top {
			return fmt.Errorf("nested repository %s: %w", strings.TrimSuffix(rel, "/"), err)
		}
		return err
	}
	for _, p := range hostgit.SplitNul(string(out)) {
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
	f := hostgit.SplitNul(string(out))
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
		for _, d := range hostgit.SplitNul(string(out)) {
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

// treeRepo is the repository of the tree the agent and the verifier work
// in: Root's (nil when there is none), or a worker's linked working tree,
// found from the repository's common directory (never from the tree's own
// .git file) — an error when the tree is no such thing.
func (b *buildMode) treeRepo() (*hostgit.Repo, error) {
	if b.repo == nil || b.cfg.Workspace == nil {
		return b.repo, nil
	}
	return b.repo.Linked(b.dir())
}

// newGuard prepares the verifier's guards of the run's tree: the tree
// guard with its private store at store, and the repository guard.
func (b *buildMode) newGuard(ctx context.Context, store string) (*treeGuard, error) {
	repo, err := b.treeRepo()
	if err != nil {
		return nil, fmt.Errorf("loop: verify: %w", err)
	}
	g, err := newTreeGuardIn(ctx, treeGuardParams{Root: b.dir(), Project: b.cfg.Root, Dir: store, AgentID: b.cfg.AgentID, Proj: repo})
	if err != nil {
		return nil, err
	}
	g.meta = &repoGuard{repo: repo, root: b.cfg.Root, own: b.ownRefs()}
	if b.cfg.Workspace != nil {
		// A worker's tree may be made again during the run (with another
		// admin directory): it is looked up again for each verification.
		g.locate = b.treeRepo
	}
	return g, nil
}

// guardState is what the guards recorded before a verifier session.
type guardState struct {
	tree string
	repo *repoState
	// root is the tree's top as it was (a real directory): the tree is
	// compared and restored only while its path still names it.
	root os.FileInfo
}

// treeReplaced is the change that names a tree whose top the session
// replaced (by a link to another checkout, say): nothing is listed or
// restored through its path then.
const treeReplaced = "(the tree itself: replaced, left as it is)"

// sameTree reports whether root still names the directory was.
func sameTree(root string, was os.FileInfo) bool {
	fi, err := os.Lstat(root)
	return err == nil && was != nil && fi.IsDir() && os.SameFile(fi, was)
}

// record records the repository's state and snapshots the tree, before a
// verifier session.
func (g *treeGuard) record(ctx context.Context) (guardState, error) {
	var s guardState
	fi, err := os.Lstat(g.root)
	if err != nil || !fi.IsDir() {
		return s, fmt.Errorf("the tree %s is no real directory", g.root)
	}
	s.root = fi
	if g.locate != nil {
		repo, err := g.locate()
		if err != nil {
			return s, err
		}
		g.proj = repo
		if g.meta != nil {
			g.meta.repo = repo
		}
	}
	if g.meta != nil {
		var err error
		if s.repo, err = g.meta.record(ctx); err != nil {
			return s, fmt.Errorf("recording the repository: %w", err)
		}
	}
	tree, err := g.snapshot(ctx)
	if err == nil && !sameTree(g.root, s.root) {
		err = fmt.Errorf("the tree %s was replaced while it was snapshotted", g.root)
	}
	if err != nil {
		if s.repo != nil {
			s.repo.close()
		}
		return guardState{}, err
	}
	s.tree = tree
	return s, nil
}

// checkAll puts back what the session changed — the repository and
// ralph's files first (its config and info/exclude decide what the tree
// listing sees), then anything in the snapshot store that should not be
// there, then the tree — and returns it all: tree paths, then the rest by
// name. An error wraps ErrVerifyRestore.
//
// A tree whose top the session replaced (a link, another directory) is
// not listed, compared or restored through its path — that would write
// into wherever the link points, the user's checkout say — and neither is
// the snapshot store when it lies inside it: the change is treeReplaced,
// which voids the verdict; a Workspace's TreeChecker sets the tree aside.
// The repository guard still puts back what it recorded, through the
// directories it opened before the session.
func (g *treeGuard) checkAll(ctx context.Context, before guardState) ([]treeChange, error) {
	var other []treeChange
	var errs []error
	replaced := !sameTree(g.root, before.root)
	if before.repo != nil {
		names, err := g.meta.check(ctx, before.repo)
		before.repo.close()
		for _, n := range names {
			other = append(other, treeChange{Path: n, Status: 'M'})
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if replaced {
		changed := append([]treeChange{{Path: treeReplaced, Status: 'T'}}, other...)
		var err error
		if len(errs) > 0 {
			err = fmt.Errorf("%w (%s): %v", ErrVerifyRestore, changeList(other), errors.Join(errs...))
		}
		return changed, err
	}
	if bad, err := g.inspect(); err == nil && len(bad) > 0 {
		fixed, err := g.sanitize(bad)
		for _, p := range fixed {
			other = append(other, treeChange{Path: g.meta.label(filepath.Join(g.dir, filepath.FromSlash(p))), Status: 'M'})
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	changed, err := g.check(ctx, before.tree)
	changed = append(changed, other...)
	if err == nil && len(errs) > 0 {
		err = fmt.Errorf("%w (%s): %v", ErrVerifyRestore, changeList(other), errors.Join(errs...))
	}
	return changed, err
}

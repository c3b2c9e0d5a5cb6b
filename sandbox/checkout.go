package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// privateCheckout is a session's private copy of the git metadata of the
// checkout it works in (see the package documentation, "A git checkout
// of its own").
type privateCheckout struct {
	// dir is the private git directory, mounted (or named by gitfile)
	// where the tree expects its .git.
	dir string
	// dotGit is the tree's .git; dotGitDir says it is a directory (dir is
	// mounted over it), else a file (gitfile is mounted over it).
	dotGit    string
	dotGitDir bool
	// gitfile is a file "gitdir: <dir>" for a .git that is a file.
	gitfile string
	// objects is the empty directory over which the repository's object
	// store is mounted read-only; dir's alternates name it.
	objects string
	// shared is the repository's object store, and alternates the stores
	// it borrows from (absolute): what the host reads besides dir's own
	// objects.
	shared     string
	alternates []string
	// modules is the checkout's submodules' git directories (the git
	// directory's modules/, "" when it has none), mounted read-only at
	// modules/ in dir, for which dir has an empty directory.
	modules string
	// start is the commit HEAD named when the session began.
	start string
	// scratch is the session's scratch directory.
	scratch string
}

// makeCheckout copies the metadata of the checkout whose git directory is
// gitDir (in repo) into <scratch>/git: HEAD, the index (and a split
// index's shared files), the config without core.worktree, the refs (in
// one packed-refs file: making a file per loose ref cost more than the
// rest together), info/exclude, info/sparse-checkout, config.worktree and
// shallow. The objects are not copied: the copy's alternates name
// <scratch>/objects, where the repository's store is mounted read-only,
// so the agent's new objects are its own. Nor are the submodules' git
// directories (gitDir's modules/): a submodule's .git file names
// ../.git/modules/NAME, so the copy gets an empty modules/ over which the
// real one is mounted read-only. dotGit is the tree's .git, where the copy
// goes.
func makeCheckout(repo *repository, gitDir, dotGit string, dotGitDir bool, scratch string) (*privateCheckout, error) {
	c := &privateCheckout{
		dir:       filepath.Join(scratch, "git"),
		dotGit:    dotGit,
		dotGitDir: dotGitDir,
		objects:   filepath.Join(scratch, "objects"),
		shared:    filepath.Join(repo.common, "objects"),
		scratch:   scratch,
	}
	c.start = resolveHEAD(dirRefs(gitDir), dirRefs(repo.common))
	// Only what git needs to find a repository, and hooks/ (which an agent
	// may expect): each mkdir costs (0.3 ms on a loaded machine), and git
	// makes refs/heads, objects/pack and the rest when it writes them.
	for _, d := range []string{c.dir, c.objects, filepath.Join(c.dir, "objects", "info"), filepath.Join(c.dir, "refs"), filepath.Join(c.dir, "info"), filepath.Join(c.dir, "hooks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("sandbox: private checkout: %w", err)
		}
	}
	copies := []struct{ from, to string }{
		{filepath.Join(gitDir, "HEAD"), "HEAD"},
		{filepath.Join(gitDir, "index"), "index"},
		{filepath.Join(gitDir, "config.worktree"), "config.worktree"},
		{filepath.Join(gitDir, "info", "sparse-checkout"), filepath.Join("info", "sparse-checkout")},
		{filepath.Join(repo.common, "config"), "config"},
		{filepath.Join(repo.common, "info", "exclude"), filepath.Join("info", "exclude")},
		{filepath.Join(repo.common, "shallow"), "shallow"},
	}
	if shared, _ := filepath.Glob(filepath.Join(gitDir, "sharedindex.*")); len(shared) > 0 {
		for _, s := range shared {
			copies = append(copies, struct{ from, to string }{s, filepath.Base(s)})
		}
	}
	for _, cp := range copies {
		if err := copyFile(cp.from, filepath.Join(c.dir, cp.to)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sandbox: private checkout: %w", err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(gitDir, "modules")); err == nil && fi.IsDir() {
		c.modules = filepath.Join(gitDir, "modules")
		if err := os.Mkdir(filepath.Join(c.dir, "modules"), 0o755); err != nil {
			return nil, fmt.Errorf("sandbox: private checkout: %w", err)
		}
	}
	if err := packRefs(repo.common, c.dir); err != nil {
		return nil, fmt.Errorf("sandbox: private checkout: %w", err)
	}
	if err := dropWorktreeSetting(repo.host, filepath.Join(c.dir, "config")); err != nil {
		return nil, err
	}
	c.alternates = readAlternates(c.shared)
	alt := c.objects + "\n"
	for _, a := range c.alternates {
		alt += a + "\n"
	}
	if err := os.WriteFile(filepath.Join(c.dir, "objects", "info", "alternates"), []byte(alt), 0o644); err != nil {
		return nil, fmt.Errorf("sandbox: private checkout: %w", err)
	}
	if !dotGitDir {
		c.gitfile = filepath.Join(scratch, "gitfile")
		if err := os.WriteFile(c.gitfile, []byte("gitdir: "+c.dir+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("sandbox: private checkout: %w", err)
		}
	}
	return c, nil
}

// readAlternates returns the object stores objects borrows from
// (objects/info/alternates), absolute: relative entries are relative to
// objects, which the private copy does not share a path with.
func readAlternates(objects string) []string {
	f, err := openNB(filepath.Join(objects, "info", "alternates"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(io.LimitReader(f, maxSmall))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(objects, line)
		}
		out = append(out, filepath.Clean(line))
	}
	return out
}

// finish reads where the private HEAD ended, and whether that descends
// from where it started. The private directory is the agent's: its files
// are opened under an os.Root, without blocking, and the ancestry is
// decided by the host's git reading the private objects and the shared
// ones as data (GIT_DIR a directory of ralph's own, so that no
// configuration, hook or program of the private copy is looked at).
func (c *privateCheckout) finish(ctx context.Context) *Checkout {
	out := &Checkout{Start: c.start}
	root, err := os.OpenRoot(c.dir)
	if err != nil {
		return out
	}
	defer root.Close()
	out.End = resolveHEAD(rootRefs(root), rootRefs(root))
	switch {
	case out.End == c.start:
		out.Descends = true
	case c.start == "":
		out.Descends = true // an unborn branch: any history descends from it
	case out.End == "":
	default:
		ctx, cancel := context.WithTimeout(ctx, gitTimeout)
		defer cancel()
		out.Descends = c.isAncestor(ctx, c.start, out.End)
	}
	return out
}

// packRefs writes the refs of the common directory common into the git
// directory dst: its packed-refs and its loose refs, in one packed-refs
// file (a loose ref wins over a packed one of the same name, as in git);
// a symbolic loose ref (refs/remotes/origin/HEAD) is copied as a file.
func packRefs(common, dst string) error {
	loose := map[string]string{}
	var names []string
	err := filepath.WalkDir(filepath.Join(common, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(common, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		b, err := readSmall(openNB, p)
		if err != nil {
			return err
		}
		content := strings.TrimSpace(string(b))
		switch {
		case isObjectID(content):
			loose[name] = content
			names = append(names, name)
		case strings.HasPrefix(content, "ref: "):
			to := filepath.Join(dst, rel)
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o644)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var out strings.Builder
	out.WriteString("# pack-refs with: peeled \n")
	if f, err := openNB(filepath.Join(common, "packed-refs")); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		skip := false // the ref before a peeled line was overridden
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" || line[0] == '#':
				continue
			case line[0] == '^':
				if skip {
					continue
				}
			default:
				_, name, _ := strings.Cut(line, " ")
				_, skip = loose[name]
				if skip {
					continue
				}
			}
			out.WriteString(line + "\n")
		}
		if err := sc.Err(); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, name := range names {
		out.WriteString(loose[name] + " " + name + "\n")
	}
	return os.WriteFile(filepath.Join(dst, "packed-refs"), []byte(out.String()), 0o644)
}

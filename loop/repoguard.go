package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralph-dev/ralph/hostgit"
	"github.com/ralph-dev/ralph/safefile"
)

// A RefOwner is a Workspace that names the refs other workers'
// integrations move while this worker's verifier runs (its integration
// branch, ralph's task and attempt branches, remote-tracking refs): the
// verifier's guard neither counts nor undoes their moves. A Workspace
// that is no RefOwner owns refs/heads/ralph/.
type RefOwner interface {
	OwnRef(ref string) bool
}

// repoGuard undoes what a verifier session changed beside the working tree
// (ARCHITECTURE.md §7, item 10 of issue 20): the repository's refs
// (commits, tags, moved or deleted branches, stashes, notes), HEAD, the
// index, the hooks, the config and config.worktree files, info/ (exclude,
// attributes, sparse-checkout, grafts), objects/info/alternates, shallow, a
// stale index.lock, the state of an operation in progress (MERGE_HEAD,
// CHERRY_PICK_HEAD, REVERT_HEAD, ORIG_HEAD, AUTO_MERGE, the merge and
// squash messages, sequencer/, rebase-merge/, rebase-apply/, BISECT_*: a
// forged MERGE_HEAD would make ralph's next commit a merge with a parent of
// the verifier's choosing) — and ralph's own files under <Root>/.ralph
// (ralphGuarded: prompt overrides, skills, features' specs and plans,
// worktree-include, anything else put there), but what ralph itself writes
// while the verifier runs. It records them before the session and puts back
// whatever differs after it; any difference voids the verdict, as a changed
// file does.
type repoGuard struct {
	repo *hostgit.Repo // the tree's repository; nil: none
	root string        // ralph's Root
	own  func(ref string) bool
}

// A guardArea is a file or directory the guard records: name under base.
type guardArea struct {
	base, name string
	// ralph: the area is <Root>/.ralph, without what ralphGuarded leaves
	// out.
	ralph bool
}

// gitState are the files and directories of a git directory that say an
// operation is in progress, and what the next commit is made of.
var gitState = []string{"MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "MERGE_RR", "MERGE_AUTOSTASH", "AUTO_MERGE",
	"CHERRY_PICK_HEAD", "REVERT_HEAD", "ORIG_HEAD", "SQUASH_MSG", "REBASE_HEAD", "sequencer", "rebase-merge",
	"rebase-apply", "BISECT_LOG", "BISECT_START", "BISECT_EXPECTED_REV", "BISECT_NAMES", "BISECT_TERMS",
	"BISECT_ANCESTORS_OK", "BISECT_FIRST_PARENT", "BISECT_HEAD", "BISECT_RUN"}

// ralphGuarded reports whether the guard covers the entry name directly
// under <Root>/.ralph. It leaves out what ralph writes while a verifier
// runs, and what has a guard of its own: logs/ (session logs), the task
// store's files (progress.db and its -wal, -shm, -journal and -lock
// files; db.json, a JSON store), worktrees/ (the workers' trees, each
// with its own guard, and their snapshot stores), verify-snapshot.git
// (the tree guard's store, inspected on its own), tree.lock (the lock
// of the working tree, which a restore would replace by another file
// while the run holds its lock: treelock.go) and ralph's own temporary
// files. Everything else is read by ralph to make a prompt or
// set up a tree — prompts/, skills/, features/<name>/spec.md and plan.md,
// worktree-include — or unknown, and guarded.
func ralphGuarded(name string) bool {
	switch {
	case name == "logs", name == "worktrees", name == snapshotDir, name == treeLockName,
		strings.HasPrefix(name, "progress.db"), strings.HasPrefix(name, "db.json"),
		strings.HasPrefix(name, ".ralph-tmp-"), strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") && strings.Contains(name, ".ralph-"):
		return false
	}
	return true
}

// areas are the places the guard records.
func (g *repoGuard) areas() []guardArea {
	var as []guardArea
	if g.repo != nil {
		c, d := g.repo.CommonDir, g.repo.GitDir
		for _, n := range []string{"config", "config.worktree", "hooks", "info", "objects/info/alternates",
			"objects/info/http-alternates", "shallow"} {
			as = append(as, guardArea{base: c, name: n})
		}
		for _, n := range append([]string{"HEAD", "index.lock", "HEAD.lock"}, gitState...) {
			as = append(as, guardArea{base: d, name: n})
		}
		if d != c {
			for _, n := range []string{"config.worktree", "info", "commondir", "gitdir"} {
				as = append(as, guardArea{base: d, name: n})
			}
		}
	}
	return append(as, guardArea{base: g.root, name: ".ralph", ralph: true})
}

// A fileRec is one recorded file, directory or symlink.
type fileRec struct {
	mode fs.FileMode // type and permissions
	data []byte      // a file's content, a symlink's target
}

func (a fileRec) same(b fileRec) bool {
	return a.mode == b.mode && bytes.Equal(a.data, b.data)
}

// repoState is what record saw.
type repoState struct {
	files map[guardArea]map[string]fileRec // area → path under base → record
	refs  map[string]string                // ref → object id, or "ref: <target>"
	stage string                           // git ls-files --stage: the index's content
	index []byte                           // the index file itself
	roots map[string]*safefile.Dir         // base → opened when recorded
}

func (s *repoState) close() {
	for _, r := range s.roots {
		r.Close()
	}
}

// record records the state check compares with. The directories are
// opened now and kept open: what the session does to their paths (a .git
// replaced by a link) does not move the restore elsewhere.
func (g *repoGuard) record(ctx context.Context) (*repoState, error) {
	s := &repoState{files: map[guardArea]map[string]fileRec{}, roots: map[string]*safefile.Dir{}}
	for _, a := range g.areas() {
		st, ok := s.roots[a.base]
		if !ok {
			var err error
			st, err = safefile.OpenDir(a.base, "")
			if errors.Is(err, fs.ErrNotExist) {
				s.roots[a.base] = nil
				continue
			}
			if err != nil {
				s.close()
				return nil, err
			}
			s.roots[a.base] = st
		}
		if st == nil {
			continue
		}
		recs, err := walkArea(st, a)
		if err != nil {
			s.close()
			return nil, err
		}
		s.files[a] = recs
	}
	if g.repo == nil {
		return s, nil
	}
	var err error
	if s.refs, err = g.refs(ctx); err == nil {
		s.stage, err = g.stage(ctx)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	if st := s.roots[g.repo.GitDir]; st != nil {
		s.index, _ = st.ReadFile("index")
	}
	return s, nil
}

// walkArea records a's name under st and, for a directory, everything in
// it, without following links (for .ralph, what ralphGuarded covers).
func walkArea(st *safefile.Dir, a guardArea) (map[string]fileRec, error) {
	recs := map[string]fileRec{}
	// p is the path below st, n its name in d (each directory is opened
	// once, and what is in it looked at from it).
	var walk func(d *safefile.Dir, p, n string) error
	walk = func(d *safefile.Dir, p, n string) error {
		fi, err := d.Lstat(n)
		if err != nil {
			// Missing, beyond a file, or beyond a link: nothing there to
			// record.
			return nil
		}
		rec := fileRec{mode: fi.Mode()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := d.Readlink(n)
			if err != nil {
				return err
			}
			rec.data = []byte(t)
		case fi.Mode().IsRegular():
			if rec.data, err = d.ReadFile(n); err != nil {
				return err
			}
		case fi.IsDir():
			sub, err := d.OpenDir(n)
			if err != nil {
				return err
			}
			defer sub.Close()
			entries, err := sub.ReadDir(".")
			if err != nil {
				return err
			}
			recs[p] = rec
			for _, e := range entries {
				if a.ralph && p == a.name && !ralphGuarded(e.Name()) {
					continue
				}
				if err := walk(sub, path.Join(p, e.Name()), e.Name()); err != nil {
					return err
				}
			}
			return nil
		}
		recs[p] = rec
		return nil
	}
	err := walk(st, a.name, a.name)
	return recs, err
}

// refs lists every ref but HEAD: name → object id, or the target of a
// symbolic ref.
func (g *repoGuard) refs(ctx context.Context) (map[string]string, error) {
	out, err := runGit(ctx, g.repo, g.repo.WorkTree, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(symref)")
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\x00")
		if len(f) != 3 {
			continue
		}
		if f[2] != "" {
			refs[f[0]] = "ref: " + f[2]
		} else {
			refs[f[0]] = f[1]
		}
	}
	return refs, nil
}

// stage is the index's content, stat data aside: a verifier's `git
// status` refreshes the index and changes nothing.
func (g *repoGuard) stage(ctx context.Context) (string, error) {
	return runGit(ctx, g.repo, g.repo.WorkTree, "ls-files", "--stage", "-z")
}

// check compares with before and puts back what differs. It returns what
// the session had changed (paths relative to Root where they are inside
// it, refs by name); an error means something could not be put back.
func (g *repoGuard) check(ctx context.Context, before *repoState) ([]string, error) {
	var changed []string
	var errs []error
	for _, a := range g.areas() {
		st := before.roots[a.base]
		if st == nil {
			continue
		}
		now, err := walkArea(st, a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		was := before.files[a]
		diff := diffRecs(was, now)
		for _, p := range diff {
			changed = append(changed, g.label(filepath.Join(a.base, filepath.FromSlash(p))))
		}
		if len(diff) > 0 {
			if err := restoreRecs(st, was, now); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", g.label(filepath.Join(a.base, a.name)), err))
			}
		}
	}
	if g.repo != nil {
		refs, err := g.refs(ctx)
		if err == nil {
			var moved []string
			moved, err = g.restoreRefs(ctx, before.refs, refs)
			changed = append(changed, moved...)
		}
		if err != nil {
			errs = append(errs, err)
		}
		stage, err := g.stage(ctx)
		if err == nil && stage != before.stage {
			changed = append(changed, g.label(filepath.Join(g.repo.GitDir, "index")))
			if st := before.roots[g.repo.GitDir]; st != nil {
				if before.index != nil {
					err = st.WriteFile("index", before.index, 0o644)
				} else if err = st.Remove("index"); errors.Is(err, fs.ErrNotExist) {
					err = nil
				}
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	slices.Sort(changed)
	return slices.Compact(changed), errors.Join(errs...)
}

// label names path for people: relative to Root when inside it.
func (g *repoGuard) label(p string) string {
	if rel, err := filepath.Rel(g.root, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(rel)
	}
	return p
}

// diffRecs names the paths that differ between was and now, each change
// once: an added or removed directory by itself, not its files.
func diffRecs(was, now map[string]fileRec) []string {
	var out []string
	covered := func(p string) bool {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			_, w := was[d]
			_, n := now[d]
			if w != n {
				return true
			}
		}
		return false
	}
	for p, n := range now {
		if w, ok := was[p]; (!ok || !w.same(n)) && !covered(p) {
			if ok && w.mode.IsDir() && n.mode.IsDir() {
				continue // a directory's mode: its contents say what changed
			}
			out = append(out, p)
		}
	}
	for p := range was {
		if _, ok := now[p]; !ok && !covered(p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// restoreRecs makes the paths under st what was says: what was not there
// goes, what changed type goes, and the rest is written again (files
// through a new file renamed over the path, so that no link is followed).
func restoreRecs(st *safefile.Dir, was, now map[string]fileRec) error {
	var errs []error
	// Deepest first: what is there now and was not, or is of another type.
	paths := slices.Collect(func(yield func(string) bool) {
		for p := range now {
			if !yield(p) {
				return
			}
		}
	})
	slices.SortFunc(paths, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, p := range paths {
		w, ok := was[p]
		if !ok || w.mode.Type() != now[p].mode.Type() {
			if err := st.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	// Shallowest first: directories before what they hold.
	paths = paths[:0]
	for p := range was {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		w := was[p]
		if n, ok := now[p]; ok && n.same(w) {
			continue
		}
		var err error
		switch {
		case w.mode.IsDir():
			if err = st.MkdirAll(p, w.mode.Perm()); err == nil {
				err = st.Chmod(p, w.mode.Perm())
			}
		case w.mode&fs.ModeSymlink != 0:
			st.Remove(p)
			err = st.Symlink(string(w.data), p)
		case w.mode.IsRegular():
			err = st.WriteFile(p, w.data, w.mode.Perm())
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// restoreRefs puts refs back as they were, leaving the refs g.own names
// alone, and returns the refs that had changed.
func (g *repoGuard) restoreRefs(ctx context.Context, was, now map[string]string) ([]string, error) {
	var moved []string
	var tx strings.Builder
	var symrefs [][2]string
	for ref, n := range now {
		if g.own != nil && g.own(ref) {
			continue
		}
		w, ok := was[ref]
		switch {
		case ok && w == n:
			continue
		case !ok:
			fmt.Fprintf(&tx, "option no-deref\ndelete %s\n", ref)
		case strings.HasPrefix(w, "ref: "):
			symrefs = append(symrefs, [2]string{ref, strings.TrimPrefix(w, "ref: ")})
		default:
			fmt.Fprintf(&tx, "option no-deref\nupdate %s %s\n", ref, w)
		}
		moved = append(moved, ref)
	}
	for ref, w := range was {
		if _, ok := now[ref]; ok || g.own != nil && g.own(ref) {
			continue
		}
		if t, ok := strings.CutPrefix(w, "ref: "); ok {
			symrefs = append(symrefs, [2]string{ref, t})
		} else {
			fmt.Fprintf(&tx, "create %s %s\n", ref, w)
		}
		moved = append(moved, ref)
	}
	var errs []error
	if tx.Len() > 0 {
		cmd, err := g.repo.Command(ctx, g.repo.WorkTree, "update-ref", "-m", "ralph: undo the verifier's change", "--stdin")
		if err == nil {
			cmd.Stdin = strings.NewReader(tx.String())
			var out []byte
			if out, err = cmd.CombinedOutput(); err != nil {
				err = fmt.Errorf("git update-ref: %w: %s", err, tail(string(out)))
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range symrefs {
		if _, err := runGit(ctx, g.repo, g.repo.WorkTree, "symbolic-ref", s[0], s[1]); err != nil {
			errs = append(errs, err)
		}
	}
	slices.Sort(moved)
	return moved, errors.Join(errs...)
}

// ownRefs is what a run's verifier guard leaves to others: nothing for a
// run of its own; for a worker, what its Workspace owns (RefOwner), or
// ralph's own branches.
func (b *buildMode) ownRefs() func(string) bool {
	ws := b.cfg.Workspace
	if ws == nil {
		return nil
	}
	if o, ok := ws.(RefOwner); ok {
		return o.OwnRef
	}
	return func(ref string) bool { return strings.HasPrefix(ref, "refs/heads/ralph/") }
}

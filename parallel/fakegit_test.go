package parallel

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// fakeGit is Git in memory: commits are file maps, worktrees are file maps
// with a HEAD. Agents in these tests write with write; a rebase replays a
// change file by file and conflicts when both sides changed a file
// differently. It counts the SwapRef calls and can lose races on demand.
type fakeGit struct {
	mu      sync.Mutex
	commits map[string]fakeCommit
	refs    map[string]string
	trees   map[string]*fakeTree
	head    string // the main tree's HEAD commit
	// beforeSwap, if set, runs before each SwapRef (unlocked): a test
	// moves the integration branch there to lose a race.
	beforeSwap func(ref string)
	swaps      map[string]int // SwapRef calls by ref
	// remotes are the other fake repositories this one fetches from and
	// pushes to, by name: the machines of a test share one.
	remotes map[string]*fakeGit
	// beforePush, if set, runs before each Push (unlocked): a test lands
	// another machine's commit there to lose a race, or ends the claim.
	beforePush func(p PushParams)
	pushes     map[string]int // Push calls by ref
	// aside lists what SetAside and RepairWorktree put aside.
	aside []string
}

type fakeCommit struct {
	parent string
	// merged is a merge commit's second parent ("" none).
	merged string
	msg    string
	files  map[string]string
}

type fakeTree struct {
	branch string // full ref, "" detached
	head   string
	files  map[string]string
	// broken, when set, is what CheckWorktree finds wrong with the tree
	// (a test breaks it as an agent would); gitFileOnly says only its
	// .git is.
	broken      string
	gitFileOnly bool
}

func newFakeGit(files map[string]string) *fakeGit {
	g := &fakeGit{commits: map[string]fakeCommit{}, refs: map[string]string{}, trees: map[string]*fakeTree{}, swaps: map[string]int{},
		remotes: map[string]*fakeGit{}, pushes: map[string]int{}}
	g.head = g.commit("", "initial", files)
	g.refs["refs/heads/main"] = g.head
	return g
}

// clone is a new fake repository with remote as its "origin": its
// commits, and main checked out at remote's main.
func (remote *fakeGit) clone() *fakeGit {
	remote.mu.Lock()
	defer remote.mu.Unlock()
	g := &fakeGit{commits: maps.Clone(remote.commits), refs: map[string]string{}, trees: map[string]*fakeTree{}, swaps: map[string]int{},
		remotes: map[string]*fakeGit{"origin": remote}, pushes: map[string]int{}}
	g.head = remote.refs["refs/heads/main"]
	g.refs["refs/heads/main"] = g.head
	return g
}

func (g *fakeGit) commit(parent, msg string, files map[string]string) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d", parent, msg, len(g.commits))
	for _, k := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%s\x00", k, files[k])
	}
	id := hex.EncodeToString(h.Sum(nil))
	g.commits[id] = fakeCommit{parent: parent, msg: msg, files: maps.Clone(files)}
	return id
}

// write sets a file in a worktree ("" content deletes it).
func (g *fakeGit) write(dir, path, content string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.trees[dir]
	if content == "" {
		delete(t.files, path)
		return
	}
	t.files[path] = content
}

// filesAt returns the files of the commit ref points at.
func (g *fakeGit) filesAt(ref string) map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.commits[g.refs[ref]].files)
}

// log returns the messages from ref's commit back to the root.
func (g *fakeGit) log(ref string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for c := g.refs[ref]; c != ""; c = g.commits[c].parent {
		out = append(out, g.commits[c].msg)
	}
	return out
}

func (g *fakeGit) Check(context.Context) error { return nil }

// Resolve resolves a ref, HEAD (the main tree's), or a commit's id (as
// git rev-parse does).
func (g *fakeGit) Resolve(_ context.Context, ref string) (string, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ref == "HEAD" {
		return g.head, true, nil
	}
	if _, ok := g.commits[ref]; ok {
		return ref, true, nil
	}
	c, ok := g.refs[ref]
	return c, ok, nil
}

func (g *fakeGit) CheckedOut(context.Context) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []string{"refs/heads/main"}
	for _, t := range g.trees {
		if t.branch != "" {
			out = append(out, t.branch)
		}
	}
	return out, nil
}

func (g *fakeGit) CreateRef(_ context.Context, ref, commit string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.refs[ref]; ok {
		return ErrRefExists
	}
	g.refs[ref] = commit
	return nil
}

// SwapRef is SwapRefs of one ref, so that it refuses a missing ref as
// ExecGit does (old "" included).
func (g *fakeGit) SwapRef(ctx context.Context, ref, new, old string) error {
	return g.SwapRefs(ctx, RefMove{Ref: ref, New: new, Old: old})
}

// SwapRefs counts as one SwapRef of each ref; beforeSwap runs for the
// first.
func (g *fakeGit) SwapRefs(_ context.Context, moves ...RefMove) error {
	if g.beforeSwap != nil && len(moves) > 0 {
		g.beforeSwap(moves[0].Ref)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range moves {
		g.swaps[m.Ref]++
		if at, ok := g.refs[m.Ref]; !ok || at != m.Old {
			return fmt.Errorf("%w: %s", ErrRefMoved, m.Ref)
		}
	}
	for _, m := range moves {
		g.refs[m.Ref] = m.New
	}
	return nil
}

func (g *fakeGit) SetRef(_ context.Context, ref, commit string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refs[ref] = commit
	return nil
}

// Mark's commit depends on its text alone, as git's does.
func (g *fakeGit) Mark(_ context.Context, text string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := fmt.Sprintf("%x", sha1.Sum([]byte("mark\x00"+text)))
	g.commits[id] = fakeCommit{msg: strings.TrimRight(text, "\n") + "\n", files: map[string]string{}}
	return id, nil
}

// refsUnder lists the refs under prefix, sorted, for the tests (the seam
// lists branches only: Branches).
func (g *fakeGit) refsUnder(prefix string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	// A prefix matches whole components, as git for-each-ref does:
	// ".../x" lists ".../x/1", not ".../xy/1".
	dir := strings.TrimSuffix(prefix, "/") + "/"
	var out []string
	for r := range g.refs {
		if r == prefix || strings.HasPrefix(r, dir) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

func (g *fakeGit) IsAncestor(_ context.Context, a, b string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reaches(b, a), nil
}

// history returns tip and its ancestors, both parents of a merge
// followed, first parents first; g.mu is held.
func (g *fakeGit) history(tip string) []string {
	var out []string
	seen := map[string]bool{}
	for stack := []string{tip}; len(stack) > 0; {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c == "" || seen[c] {
			continue
		}
		seen[c] = true
		out = append(out, c)
		stack = append(stack, g.commits[c].merged, g.commits[c].parent)
	}
	return out
}

func (g *fakeGit) Trailers(_ context.Context, base, tip, key string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, c := range g.between(base, tip) {
		for _, line := range trailerBlock(g.commits[c].msg) {
			k, v, _ := strings.Cut(line, ":")
			if strings.EqualFold(strings.TrimSpace(k), key) {
				out = append(out, strings.TrimSpace(v))
			}
		}
	}
	return out, nil
}

// trailerBlock returns the trailer lines of a commit message as git reads
// them, simplified: the message's last paragraph, when every line of it
// is "Token: value" (and it is not the subject).
func trailerBlock(msg string) []string {
	paras := strings.Split(strings.TrimSpace(msg), "\n\n")
	if len(paras) < 2 {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(paras[len(paras)-1]), "\n")
	for _, l := range lines {
		k, _, ok := strings.Cut(l, ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil
		}
	}
	return lines
}

// between returns the commits reachable from tip and not from base (all
// of them when base is ""), newest first, as git rev-list tip ^base;
// g.mu is held.
func (g *fakeGit) between(base, tip string) []string {
	seen := map[string]bool{}
	if base != "" {
		for _, c := range g.history(base) {
			seen[c] = true
		}
	}
	var out []string
	for _, c := range g.history(tip) {
		if !seen[c] {
			out = append(out, c)
		}
	}
	return out
}

// reset moves a tree's HEAD to commit with its files, as an agent's git
// reset --hard or git checkout --detach would.
func (g *fakeGit) reset(dir, commit string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.trees[dir]
	t.head, t.files = commit, maps.Clone(g.commits[commit].files)
}

// commitIn commits a tree's files on its HEAD, as an agent's git commit
// -a would, and returns the commit.
func (g *fakeGit) commitIn(dir, msg string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.trees[dir]
	t.head = g.commit(t.head, msg, t.files)
	return t.head
}

// breakTree makes CheckWorktree find dir broken, as problem says.
func (g *fakeGit) breakTree(dir, problem string, gitFileOnly bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.trees[dir].broken, g.trees[dir].gitFileOnly = problem, gitFileOnly
}

func (g *fakeGit) Commits(_ context.Context, base, tip string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.between(base, tip), nil
}

func (g *fakeGit) Branches(context.Context) (map[string]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for r, c := range g.refs {
		if strings.HasPrefix(r, "refs/heads/") {
			out[r] = c
		}
	}
	return out, nil
}

func (g *fakeGit) CheckWorktree(_ context.Context, dir string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.trees[dir]
	switch {
	case !ok:
		return &WorktreeError{Dir: dir, Problem: "it is gone", Gone: true}
	case t.broken != "":
		return &WorktreeError{Dir: dir, Problem: t.broken, GitFileOnly: t.gitFileOnly}
	}
	return nil
}

func (g *fakeGit) RepairWorktree(_ context.Context, dir, aside string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.trees[dir]
	if !ok || !t.gitFileOnly {
		return fmt.Errorf("fake: %s cannot be repaired", dir)
	}
	t.broken, t.gitFileOnly = "", false
	g.aside = append(g.aside, aside+"/.git")
	return nil
}

func (g *fakeGit) SetAside(_ context.Context, dir, aside string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.trees[dir]; ok {
		delete(g.trees, dir)
		g.trees[aside] = t
		g.aside = append(g.aside, aside)
	}
	return nil
}

func (g *fakeGit) AddWorktree(_ context.Context, dir, commit string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.trees[dir]; ok {
		return fmt.Errorf("fake: %s exists", dir)
	}
	g.trees[dir] = &fakeTree{head: commit, files: maps.Clone(g.commits[commit].files)}
	return nil
}

func (g *fakeGit) HeadOf(_ context.Context, dir string) (string, string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.trees[dir]
	if !ok {
		return "refs/heads/main", g.head, nil // the repository's own tree
	}
	return t.branch, t.head, nil
}

func (g *fakeGit) Status(_ context.Context, dir string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.trees[dir]
	head := g.commits[t.head].files
	var out []string
	for _, p := range slices.Sorted(maps.Keys(t.files)) {
		if head[p] != t.files[p] {
			out = append(out, p)
		}
	}
	for p := range head {
		if _, ok := t.files[p]; !ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (g *fakeGit) Switch(_ context.Context, dir, ref, commit string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ref == "refs/heads/main" {
		return fmt.Errorf("fake: %s is checked out in the main tree", ref)
	}
	for _, o := range g.trees {
		if o.branch == ref {
			return fmt.Errorf("fake: %s is checked out", ref)
		}
	}
	t := g.trees[dir]
	t.branch, t.head, t.files = "", commit, maps.Clone(g.commits[commit].files)
	if ref != "" {
		g.refs[ref] = commit
	}
	return nil
}

func (g *fakeGit) Commit(_ context.Context, dir, base, msg string, except []string) (string, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.trees[dir]
	files := maps.Clone(t.files)
	for p := range files {
		if excluded(p, except) {
			delete(files, p)
		}
	}
	t.head = base
	if t.branch != "" {
		g.refs[t.branch] = base
	}
	if maps.Equal(files, g.commits[base].files) {
		return base, false, nil
	}
	c := g.commit(base, msg, files)
	t.head = c
	if t.branch != "" {
		g.refs[t.branch] = c
	}
	return c, true, nil
}

// Rebase replays the commits base..HEAD one by one onto onto, as git
// rebase does: each commit's own change, file by file, conflicting where
// the files it changes differ on the new line; a commit the new line
// makes empty is dropped. A conflict changes nothing.
func (g *fakeGit) Rebase(_ context.Context, dir, base, onto string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.trees[dir]
	if base == onto {
		return t.head, nil
	}
	mine := g.between(base, t.head)
	head := onto
	for i := len(mine) - 1; i >= 0; i-- {
		c := g.commits[mine[i]]
		from, to, theirs := g.commits[c.parent].files, c.files, g.commits[head].files
		out := maps.Clone(theirs)
		var conflicts []string
		for _, p := range slices.Sorted(maps.Keys(unionKeys(from, to))) {
			b, bok := from[p]
			m, mok := to[p]
			if b == m && bok == mok {
				continue // not changed by this commit
			}
			th, tok := theirs[p]
			if (th != b || tok != bok) && (th != m || tok != mok) {
				conflicts = append(conflicts, p)
				continue
			}
			if mok {
				out[p] = m
			} else {
				delete(out, p)
			}
		}
		if len(conflicts) > 0 {
			return "", &ConflictError{Paths: conflicts}
		}
		if maps.Equal(out, theirs) && !maps.Equal(from, to) {
			continue // made empty by the new line: dropped
		}
		head = g.commit(head, c.msg, out)
	}
	t.head, t.files = head, maps.Clone(g.commits[head].files)
	if t.branch != "" {
		g.refs[t.branch] = head
	}
	return head, nil
}

func unionKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func (g *fakeGit) CheckRemote(_ context.Context, remote string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.remotes[remote]; !ok {
		return fmt.Errorf("%w: %q", ErrNoRemote, remote)
	}
	return nil
}

// Fetch copies the remote's commits (all of them: ids are content) and
// sets the tracking ref.
func (g *fakeGit) Fetch(_ context.Context, remote, ref string) (string, bool, error) {
	g.mu.Lock()
	r := g.remotes[remote]
	g.mu.Unlock()
	if r == nil {
		return "", false, fmt.Errorf("fake: no remote %q", remote)
	}
	r.mu.Lock()
	commit, ok := r.refs[ref]
	commits := maps.Clone(r.commits)
	r.mu.Unlock()
	if !ok {
		return "", false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	maps.Copy(g.commits, commits)
	g.refs[trackingRef(remote, ref)] = commit
	return commit, true, nil
}

func (g *fakeGit) RemoteRefs(_ context.Context, remote, prefix string) (map[string]string, error) {
	g.mu.Lock()
	r := g.remotes[remote]
	g.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("fake: no remote %q", remote)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for ref, c := range r.refs {
		if strings.HasPrefix(ref, prefix) {
			out[ref] = c
		}
	}
	return out, nil
}

// Push copies this repository's commits to the remote and sets the ref
// as p.Mode allows; the fast-forward test is the remote's ancestry.
func (g *fakeGit) Push(_ context.Context, p PushParams) error {
	if g.beforePush != nil {
		g.beforePush(p)
	}
	if err := pushable(p.Ref, p.Mode); err != nil {
		return err
	}
	if p.Guard != nil {
		if err := pushable(p.Guard.Ref, PushReplace); err != nil {
			return err
		}
	}
	g.mu.Lock()
	g.pushes[p.Ref]++
	r := g.remotes[p.Remote]
	commits := maps.Clone(g.commits)
	g.mu.Unlock()
	if r == nil {
		return fmt.Errorf("fake: no remote %q", p.Remote)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.Copy(r.commits, commits)
	if m := p.Guard; m != nil {
		if at, ok := r.refs[m.Ref]; !ok || at != m.Old {
			return ErrRefMoved
		}
	}
	now, there := r.refs[p.Ref]
	switch {
	case there && now == p.Commit:
	case p.Mode == PushCreate && there:
		return ErrRefExists
	case p.Mode == PushReplace && p.Old != "" && now != p.Old:
		return ErrRefMoved
	case (p.Mode == "" || p.Mode == PushFastForward) && there && !r.reaches(p.Commit, now):
		return ErrRefMoved
	}
	r.refs[p.Ref] = p.Commit
	if m := p.Guard; m != nil {
		r.refs[m.Ref] = m.New
	}
	return nil
}

// reaches reports whether commit a has b among its ancestors (or is b);
// g.mu is held.
func (g *fakeGit) reaches(a, b string) bool {
	return slices.Contains(g.history(a), b)
}

// Parents returns the commit's parents: a merge's two, another's one.
func (g *fakeGit) Parents(_ context.Context, commit string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.commits[commit]
	switch {
	case !ok:
		return nil, fmt.Errorf("fake: no commit %s", commit)
	case c.parent == "":
		return nil, nil
	case c.merged != "":
		return []string{c.parent, c.merged}, nil
	}
	return []string{c.parent}, nil
}

// Merge merges theirs into ours file by file against their first common
// ancestor (in ours' history, theirs' nearest): a file both sides
// changed differently conflicts, and nothing is made.
func (g *fakeGit) Merge(_ context.Context, ours, theirs, message string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	mine := map[string]bool{}
	for _, c := range g.history(ours) {
		mine[c] = true
	}
	var base string
	for _, c := range g.history(theirs) {
		if mine[c] {
			base = c
			break
		}
	}
	b, o, th := g.commits[base].files, g.commits[ours].files, g.commits[theirs].files
	out := map[string]string{}
	var conflicts []string
	for _, p := range slices.Sorted(maps.Keys(unionKeys(unionKeysOf(b, o), th))) {
		bv, ov, tv := b[p], o[p], th[p]
		switch {
		case ov == tv, tv == bv:
		case ov == bv:
			ov = tv
		default:
			conflicts = append(conflicts, p)
		}
		if ov != "" {
			out[p] = ov
		}
	}
	if len(conflicts) > 0 {
		return "", &ConflictError{Paths: conflicts}
	}
	id := g.commit(ours, message, out)
	c := g.commits[id]
	c.merged = theirs
	g.commits[id] = c
	return id, nil
}

// unionKeysOf is a map holding the keys of a and b, for unionKeys.
func unionKeysOf(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

var _ Git = (*fakeGit)(nil)

func (g *fakeGit) Refs(_ context.Context, prefix string) (map[string]string, error) {
	out := map[string]string{}
	for _, r := range g.refsUnder(prefix) {
		g.mu.Lock()
		out[r] = g.refs[r]
		g.mu.Unlock()
	}
	return out, nil
}

// Cherry compares commits by their change to their first parent, as git
// cherry's patch ids do.
func (g *fakeGit) Cherry(_ context.Context, upstream, head string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	landed := map[string]bool{}
	for _, c := range g.between(head, upstream) {
		landed[g.patch(c)] = true
	}
	var out []string
	for _, c := range g.between(upstream, head) {
		if !landed[g.patch(c)] {
			out = append(out, c)
		}
	}
	return out, nil
}

// patch is commit c's change to its first parent, as text; g.mu is held.
func (g *fakeGit) patch(c string) string {
	was, is := g.commits[g.commits[c].parent].files, g.commits[c].files
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(unionKeysOf(was, is))) {
		if was[p] != is[p] {
			fmt.Fprintf(&b, "%q %q %q\n", p, was[p], is[p])
		}
	}
	return b.String()
}

func (g *fakeGit) DeleteRef(_ context.Context, ref, old string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if at, ok := g.refs[ref]; !ok || at != old {
		return fmt.Errorf("%w: %s", ErrRefMoved, ref)
	}
	delete(g.refs, ref)
	return nil
}

func (g *fakeGit) RemoveWorktree(_ context.Context, dir string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.trees[dir]
	if !ok {
		return fmt.Errorf("fake: no worktree %s", dir)
	}
	head := g.commits[t.head].files
	if !maps.Equal(head, t.files) {
		return fmt.Errorf("fake: %s has changes", dir)
	}
	delete(g.trees, dir)
	return nil
}

package sandbox

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// boundary makes a Boundary over the project without looking for the
// tool: the tests of what it decides need no bubblewrap.
func (p *project) boundary(t testing.TB) *Boundary {
	t.Helper()
	b, err := (&Sandbox{Path: "/usr/bin/bwrap"}).Boundary(BoundaryParams{Root: p.repo, Env: p.env})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBoundaryTree(t *testing.T) {
	p := newProject(t)
	b := p.boundary(t)
	mkdirs(t, filepath.Join(p.repo, "src"), filepath.Join(p.tree, "pkg"), filepath.Join(p.repo, ".ralph", "worktrees", "w2"))
	for _, tc := range []struct {
		dir, want string
	}{
		{p.repo, p.repo},
		{filepath.Join(p.repo, "src"), p.repo},
		{p.tree, p.tree},
		{filepath.Join(p.tree, "pkg"), p.tree},
		{filepath.Join(p.repo, ".ralph", "worktrees", "w2"), filepath.Join(p.repo, ".ralph", "worktrees", "w2")},
	} {
		got, err := b.tree(tc.dir)
		if err != nil || got != tc.want {
			t.Errorf("tree(%s) = %q, %v; want %s", tc.dir, got, err, tc.want)
		}
	}
	for _, dir := range []string{
		filepath.Join(p.repo, ".ralph"),
		filepath.Join(p.repo, ".ralph", "logs"),
		filepath.Join(p.repo, ".ralph", "worktrees"),
		p.sibling,
		p.root,
		"/",
	} {
		if got, err := b.tree(dir); err == nil {
			t.Errorf("tree(%s) = %q, want an error", dir, got)
		}
	}
}

// TestBoundaryDecidedOnce: what a Boundary lets sessions write does not
// follow what an agent may write later — a commondir, a gitdir: line —
// and the Boundary keeps the repository it found.
func TestBoundaryDecidedOnce(t *testing.T) {
	p := newProject(t)
	b := p.boundary(t)
	common := filepath.Join(p.repo, ".git")
	writeFile(t, filepath.Join(common, "worktrees", "w1", "commondir"), "/\n")
	writeFile(t, filepath.Join(p.tree, ".git"), "gitdir: /\n")
	if b.repo.common != common || b.repo.gitDir != common || b.repo.top != p.repo {
		t.Errorf("the boundary's repository moved: %+v", *b.repo)
	}
	dotGit, dir, gitDir, err := b.checkoutOf(p.tree)
	if err != nil {
		t.Fatal(err)
	}
	if dotGit != filepath.Join(p.tree, ".git") || dir || gitDir != filepath.Join(common, "worktrees", "w1") {
		t.Errorf("checkoutOf(tree) = %s, %v, %s", dotGit, dir, gitDir)
	}

	t.Run("a project that is not a repository", func(t *testing.T) {
		proj := t.TempDir()
		writeFile(t, filepath.Join(proj, ".git"), "gitdir: /\n")
		b, err := (&Sandbox{Path: "/usr/bin/bwrap"}).Boundary(BoundaryParams{Root: proj})
		if err != nil {
			t.Fatal(err)
		}
		if b.repo != nil && within(proj, b.repo.top) {
			t.Errorf("a .git file naming / made a repository: %+v", *b.repo)
		}
	})
}

func TestHiddenFiles(t *testing.T) {
	p := newProject(t)
	pgpass := filepath.Join(p.home, ".pgpass")
	other := filepath.Join(p.root, "elsewhere.pgpass")
	dbJSON := filepath.Join(p.repo, ".ralph", "db.json")
	for _, f := range []string{pgpass, other, dbJSON, filepath.Join(p.home, ".config", "gh", "hosts.yml")} {
		writeFile(t, f, "secret\n")
	}
	b, err := (&Sandbox{Path: "/usr/bin/bwrap"}).Boundary(BoundaryParams{Root: p.repo, Env: append(p.env, "PGPASSFILE="+other)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{dbJSON, pgpass, filepath.Join(p.home, ".config", "gh", "hosts.yml"), other}
	if diff := cmp.Diff(want, b.hide); diff != "" {
		t.Errorf("hidden files (-want +got):\n%s", diff)
	}

	// git's and gh's tokens where XDG_CONFIG_HOME and GH_CONFIG_DIR put
	// them, and git's XDG credential store in the default place.
	xdg, ghDir := filepath.Join(p.root, "xdg"), filepath.Join(p.root, "gh")
	tokens := []string{
		filepath.Join(p.home, ".config", "git", "credentials"),
		filepath.Join(xdg, "git", "credentials"),
		filepath.Join(xdg, "gh", "hosts.yml"),
		filepath.Join(ghDir, "hosts.yml"),
	}
	for _, f := range tokens {
		writeFile(t, f, "https://u:ghp_secret@github.com\n")
	}
	b, err = (&Sandbox{Path: "/usr/bin/bwrap"}).Boundary(BoundaryParams{Root: p.repo, Env: append(p.env, "XDG_CONFIG_HOME="+xdg, "GH_CONFIG_DIR="+ghDir)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tokens {
		if !slices.Contains(b.hide, f) {
			t.Errorf("%s is not hidden (hidden: %q)", f, b.hide)
		}
	}
	// Relative locations are no one's: not hidden, and no error.
	if got := HiddenFiles(p.repo, []string{"XDG_CONFIG_HOME=rel", "GH_CONFIG_DIR=rel/gh"}); len(got) != 1 {
		t.Errorf("HiddenFiles with relative locations = %q, want the plan's db.json alone", got)
	}
}

func TestSessionEnv(t *testing.T) {
	got := sessionEnv([]string{"PATH=/bin", "GIT_DIR=/repo/.git", "TMPDIR=/tmp", "TMP=/tmp", "GIT_WORK_TREE=/repo", "GIT_INDEX_FILE=i", "GIT_AUTHOR_NAME=a"}, "/s/tmp")
	want := []string{"PATH=/bin", "TMP=/s/tmp", "GIT_AUTHOR_NAME=a", "TMPDIR=/s/tmp"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sessionEnv (-want +got):\n%s", diff)
	}
}

func TestPrepareState(t *testing.T) {
	dir, scratch := t.TempDir(), filepath.Join(t.TempDir(), "s")
	writeFile(t, filepath.Join(dir, "settings.json"), `{"hooks":{}}`)
	writeFile(t, filepath.Join(dir, ".credentials.json"), `{"token":"x"}`)
	writeFile(t, filepath.Join(dir, "history.jsonl"), strings.Repeat("x", copyMax+1))
	writeFile(t, filepath.Join(dir, "plugins", "p.js"), "run()")
	writeFile(t, filepath.Join(dir, "projects", "a.jsonl"), "{}")
	writeFile(t, filepath.Join(dir, "state.sqlite"), "db")
	if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	m, err := prepareState(State{Dir: dir, Keep: []string{".credentials.json", "missing.json"}, Fresh: []string{"projects", "*.sqlite"}}, dir, scratch)
	if err != nil {
		t.Fatal(err)
	}
	want := []stateEntry{{name: ".credentials.json", rw: true}, {name: "history.jsonl"}, {name: "plugins"}}
	if diff := cmp.Diff(want, m.entries, cmp.AllowUnexported(stateEntry{})); diff != "" {
		t.Errorf("mounted entries (-want +got):\n%s", diff)
	}
	if got := readFile(t, filepath.Join(scratch, "settings.json")); got != `{"hooks":{}}` {
		t.Errorf("settings.json in the scratch = %q, want a copy", got)
	}
	var names []string
	ents, _ := os.ReadDir(scratch)
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{".credentials.json", "history.jsonl", "plugins", "settings.json"}, names); diff != "" {
		t.Errorf("scratch (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(filepath.Join(scratch, ".credentials.json")); err != nil || fi.Size() != 0 {
		t.Errorf("the kept file's mount point is not an empty file: %v, %v", fi, err)
	}
}

// TestBwrapCommand pins the argument vector: the order matters to
// bubblewrap (the read-only root first, then the mounts in order).
func TestBwrapCommand(t *testing.T) {
	mounts := []mount{bind("/src/p", "/src/p"), roBind("/src/p/.ralph", "/src/p/.ralph"), bind("/tmp/s/git", "/src/p/.git")}
	base := []string{
		"--ro-bind", "/", "/", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm", "--proc", "/proc",
		"--unshare-pid", "--unshare-ipc", "--die-with-parent", "--cap-drop", "ALL",
	}
	binds := []string{
		"--bind", "/src/p", "/src/p",
		"--ro-bind", "/src/p/.ralph", "/src/p/.ralph",
		"--bind", "/tmp/s/git", "/src/p/.git",
		"--chdir", "/src/p/sub", "--",
	}
	caps := []string{"--cap-add", "CAP_CHOWN", "--cap-add", "CAP_DAC_OVERRIDE", "--cap-add", "CAP_FOWNER", "--cap-add", "CAP_FSETID"}
	for _, tc := range []struct {
		name     string
		env      string
		root     bool
		wantPath string
		wantArgs []string
	}{
		{
			name:     "signals through env",
			env:      "/usr/bin/env",
			wantPath: "/usr/bin/env",
			wantArgs: slices.Concat([]string{"--ignore-signal=TERM", "/usr/bin/bwrap"}, base, binds,
				[]string{"/usr/bin/env", "--default-signal=TERM", "/bin/agent", "-p", "--"}),
		},
		{
			name:     "root keeps the file capabilities",
			env:      "/usr/bin/env",
			root:     true,
			wantPath: "/usr/bin/env",
			wantArgs: slices.Concat([]string{"--ignore-signal=TERM", "/usr/bin/bwrap"}, base, caps, binds,
				[]string{"/usr/bin/env", "--default-signal=TERM", "/bin/agent", "-p", "--"}),
		},
		{
			name:     "no env that handles signals",
			wantPath: "/usr/bin/bwrap",
			wantArgs: slices.Concat(base, binds, []string{"/bin/agent", "-p", "--"}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, args := bwrapCommand("/usr/bin/bwrap", tc.env, tc.root, "/src/p/sub", mounts, "/bin/agent", []string{"-p", "--"})
			if path != tc.wantPath {
				t.Errorf("path = %s, want %s", path, tc.wantPath)
			}
			if diff := cmp.Diff(tc.wantArgs, args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProfile pins the macOS profile: in SBPL the last matching rule
// wins, so the order of the rules is what they mean.
func TestProfile(t *testing.T) {
	for _, tc := range []struct {
		golden string
		spec   profileSpec
	}{
		{"profile.sb", profileSpec{
			tree:     "/Users/u/src/p",
			writable: []string{"/private/var/folders/x/T/ralph-sandbox-1/tmp"},
			plan:     "/Users/u/src/p/.ralph",
			readOnly: []string{"/Users/u/src/p/.git"},
			states: []stateMount{
				{dir: "/Users/u/.codex", keep: []string{"auth.json"}, fresh: []string{"sessions", "*.sqlite-*"}},
				{dir: "/private/tmp/odd \"name\" \\ here", keep: []string{".credentials.json"}, fresh: []string{"log"}},
			},
			hide: []string{"/Users/u/.pgpass"},
		}},
		// A worker's tree lies in the plan, which is denied: the tree is
		// allowed again after that denial (else the worker could write
		// nothing), and its .git and git directory denied after that.
		{"profile-worker.sb", profileSpec{
			tree:     "/Users/u/src/p/.ralph/worktrees/w1",
			writable: []string{"/private/var/folders/x/T/ralph-sandbox-2/tmp"},
			plan:     "/Users/u/src/p/.ralph",
			readOnly: []string{"/Users/u/src/p/.ralph/worktrees/w1/.git", "/Users/u/src/p/.git", "/Users/u/src/p/.git/worktrees/w1"},
			hide:     []string{"/Users/u/.pgpass"},
		}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			got := profile(tc.spec)
			golden := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./sandbox -run TestProfile -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("profile (-%s +got):\n%s", golden, diff)
			}
			// The rules as the kernel applies them: the last that matches
			// a path decides.
			for path, want := range map[string]bool{
				tc.spec.tree + "/main.go":        true,
				tc.spec.tree + "/.git/config":    false,
				tc.spec.plan + "/progress.db":    false,
				tc.spec.plan + "/worktrees/w2/x": false,
				"/Users/u/src/p/.git/HEAD":       false,
			} {
				if got := sbplWritable(got, path); got != want {
					t.Errorf("%s writable = %v, want %v", path, got, want)
				}
			}
		})
	}
}

// sbplWritable evaluates the file-write rules of a profile written by
// profile for path: the last (allow|deny file-write* …) rule with a
// subpath or literal that matches path decides (regex rules are not
// evaluated; the paths asked of it match none).
func sbplWritable(profile, path string) bool {
	allowed := true
	var rule string
	for _, line := range strings.Split(profile, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "(deny file-write*"):
			rule = "deny"
		case strings.HasPrefix(line, "(allow file-write*"):
			rule = "allow"
		case strings.HasPrefix(line, "(deny file-read* file-write*"):
			rule = "deny"
		}
		if line == "(deny file-write*)" {
			allowed = false
			continue
		}
		for _, kind := range []string{"(subpath ", "(literal "} {
			i := strings.Index(line, kind)
			if i < 0 {
				continue
			}
			q := line[i+len(kind):]
			end := strings.Index(q[1:], `"`)
			if !strings.HasPrefix(q, `"`) || end < 0 {
				continue
			}
			p := q[1 : end+1]
			if kind == "(subpath " && within(path, p) || kind == "(literal " && path == p {
				allowed = rule == "allow"
			}
		}
	}
	return allowed
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a", "/a/b", false},
		{"/a", "/", true},
	} {
		if got := within(tc.path, tc.dir); got != tc.want {
			t.Errorf("within(%q, %q) = %v, want %v", tc.path, tc.dir, got, tc.want)
		}
	}
}

package sandbox

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestGrants(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	proj, tmp, state := filepath.Join(root, "proj"), filepath.Join(root, "tmp"), filepath.Join(root, "home", ".agent")
	mkdirs(t, filepath.Join(proj, ".ralph"), tmp, state)
	file := filepath.Join(root, "home", ".agent.json")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(proj, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	got := grants(proj, []string{
		tmp,
		filepath.Join(root, "link"), // proj, through a symbolic link
		proj,                        // again
		".ralph",                    // relative to proj, and inside it
		filepath.Join(root, "gone"), // missing
		"",
		file,
		state,
		root + "/home/../tmp/", // tmp again, not clean
	})
	want := []grant{
		{path: state, dir: true},
		{path: file, dir: false},
		{path: proj, dir: true},
		{path: tmp, dir: true},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(grant{})); diff != "" {
		t.Errorf("grants (-want +got):\n%s", diff)
	}
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

// TestBwrapCommand pins the argument vector: the order matters to
// bubblewrap (the read-only root first, then what is writable in it).
func TestBwrapCommand(t *testing.T) {
	gs := []grant{{path: "/home/u/.agent.json"}, {path: "/home/u/.codex", dir: true}, {path: "/src/p", dir: true}}
	base := []string{
		"--ro-bind", "/", "/", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm", "--proc", "/proc",
		"--unshare-pid", "--unshare-ipc", "--die-with-parent", "--cap-drop", "ALL",
	}
	binds := []string{
		"--bind", "/home/u/.agent.json", "/home/u/.agent.json",
		"--bind", "/home/u/.codex", "/home/u/.codex",
		"--bind", "/src/p", "/src/p",
		"--chdir", "/src/p/sub", "--",
	}
	caps := []string{"--cap-add", "CAP_CHOWN", "--cap-add", "CAP_DAC_OVERRIDE", "--cap-add", "CAP_FOWNER", "--cap-add", "CAP_FSETID"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
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
			wantArgs: cat([]string{"--ignore-signal=TERM", "/usr/bin/bwrap"}, base, binds,
				[]string{"/usr/bin/env", "--default-signal=TERM", "/bin/agent", "-p", "--"}),
		},
		{
			name:     "root keeps the file capabilities",
			env:      "/usr/bin/env",
			root:     true,
			wantPath: "/usr/bin/env",
			wantArgs: cat([]string{"--ignore-signal=TERM", "/usr/bin/bwrap"}, base, caps, binds,
				[]string{"/usr/bin/env", "--default-signal=TERM", "/bin/agent", "-p", "--"}),
		},
		{
			name:     "no env that handles signals",
			wantPath: "/usr/bin/bwrap",
			wantArgs: cat(base, binds, []string{"/bin/agent", "-p", "--"}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, args := bwrapCommand("/usr/bin/bwrap", tc.env, tc.root, "/src/p/sub", gs, "/bin/agent", []string{"-p", "--"})
			if path != tc.wantPath {
				t.Errorf("path = %s, want %s", path, tc.wantPath)
			}
			if diff := cmp.Diff(tc.wantArgs, args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProfile(t *testing.T) {
	got := profile([]grant{
		{path: "/Users/u/.codex", dir: true},
		{path: "/Users/u/.agent.json"},
		{path: "/private/tmp/odd \"name\" \\ here", dir: true},
		{path: "/Users/u/src/p", dir: true},
	})
	golden := filepath.Join("testdata", "profile.sb")
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
}

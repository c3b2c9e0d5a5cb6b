package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestVersionFromBuildInfo: the version line and its JSON for each kind of
// build: `go install …@v1.2.3` (a module version, no VCS), a build in a
// checkout (VCS settings, modified or not), an -ldflags override, and a
// binary without build information.
func TestVersionFromBuildInfo(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	dev := linkedInfo{version: "dev"}
	info := func(version string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/ralph-dev/ralph", Version: version}, Settings: settings}
	}
	tests := []struct {
		name   string
		linked linkedInfo
		bi     *debug.BuildInfo
		line   string
		json   string
	}{
		{
			"module version", dev, info("v1.2.3", nil),
			"ralph version v1.2.3\n",
			`{"version":"v1.2.3","commit":null,"commit_time":null,"modified":null,"go":"go1.26.0"}`,
		},
		{
			"checkout, modified", dev, info("v0.0.0-20250102030405-0123456789ab+dirty", vcs("true")),
			"ralph version v0.0.0-20250102030405-0123456789ab+dirty (commit " + rev + ", 2025-01-02T03:04:05Z, modified)\n",
			`{"version":"v0.0.0-20250102030405-0123456789ab+dirty","commit":"` + rev + `","commit_time":"2025-01-02T03:04:05Z","modified":true,"go":"go1.26.0"}`,
		},
		{
			"checkout, clean, no version stamped", dev, info("(devel)", vcs("false")),
			"ralph version dev (commit " + rev + ", 2025-01-02T03:04:05Z)\n",
			`{"version":"dev","commit":"` + rev + `","commit_time":"2025-01-02T03:04:05Z","modified":false,"go":"go1.26.0"}`,
		},
		{
			"ldflags override", linkedInfo{version: "v9.9.9"}, info("v0.0.0-20250102030405-0123456789ab", vcs("false")),
			"ralph version v9.9.9 (commit " + rev + ", 2025-01-02T03:04:05Z)\n",
			`{"version":"v9.9.9","commit":"` + rev + `","commit_time":"2025-01-02T03:04:05Z","modified":false,"go":"go1.26.0"}`,
		},
		{
			// goreleaser's: everything linked, no VCS settings
			// (-buildvcs=false, or a tree without .git).
			"release build", linkedInfo{"v1.3.0", rev, "2025-01-02T03:04:05Z", "clean"}, info("v0.0.0", nil),
			"ralph version v1.3.0 (commit " + rev + ", 2025-01-02T03:04:05Z)\n",
			`{"version":"v1.3.0","commit":"` + rev + `","commit_time":"2025-01-02T03:04:05Z","modified":false,"go":"go1.26.0"}`,
		},
		{
			"no build information", dev, nil,
			"ralph version dev\n",
			`{"version":"dev","commit":null,"commit_time":null,"modified":null,"go":"` + runtime.Version() + `"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := versionFrom(tt.linked, tt.bi)
			if diff := cmp.Diff(tt.line, v.line()); diff != "" {
				t.Errorf("line (-want +got):\n%s", diff)
			}
			got, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.json, string(got)); diff != "" {
				t.Errorf("JSON (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVersionCommand: `ralph version` prints what --version prints, and
// --json the same facts as JSON.
func TestVersionCommand(t *testing.T) {
	h := newHarness(t)
	if diff := cmp.Diff(readVersion().line(), h.ok("version")); diff != "" {
		t.Errorf("ralph version (-want +got):\n%s", diff)
	}
	var got versionInfo
	if err := json.Unmarshal([]byte(h.ok("version", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(readVersion(), got); diff != "" {
		t.Errorf("ralph version --json (-want +got):\n%s", diff)
	}
}

// TestVersionPrintsCommit is issue 23's "`go install ./cmd/ralph` then
// `ralph --version` prints the commit": the module built from the
// repository root as go install builds it, with the VCS stamp asked for
// (-buildvcs=true, since GOFLAGS may turn it off), prints the commit git
// says HEAD is, in --version, `version` and `version --json`. The go
// command stamps only a checkout whose .git is a directory (not a `git
// worktree`): elsewhere the test skips, saying so, except under CI=true,
// where .ci/run works in a clean checkout.
func TestVersionPrintsCommit(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	notHere := func(why string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; CI runs in a clean git checkout, where the go command stamps the commit", why)
		}
		t.Skipf("%s: the go command stamps the commit only in a git checkout whose .git is a directory", why)
	}
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		notHere("no .git directory in " + root)
	}
	if _, err := exec.LookPath("git"); err != nil {
		notHere("no git on PATH")
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	head := strings.TrimSpace(string(out))

	bin := filepath.Join(t.TempDir(), "ralph")
	build := exec.CommandContext(t.Context(), "go", "build", "-buildvcs=true", "-o", bin, "./cmd/ralph")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	dir, env := t.TempDir(), os.Environ()
	code, line, stderr := runBinary(t, bin, dir, env, "--version")
	if code != 0 || stderr != "" {
		t.Fatalf("ralph --version: exit %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(line, "ralph version ") || !strings.Contains(line, "(commit "+head) || !strings.HasSuffix(line, ")\n") {
		t.Errorf("ralph --version printed %q, want the commit %s", line, head)
	}
	if code, got, stderr := runBinary(t, bin, dir, env, "version"); code != 0 || got != line {
		t.Errorf("ralph version: exit %d, stdout %q, stderr %q; want %q", code, got, stderr, line)
	}
	code, js, stderr := runBinary(t, bin, dir, env, "version", "--json")
	if code != 0 {
		t.Fatalf("ralph version --json: exit %d, stderr %q", code, stderr)
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("ralph version --json: %v\n%s", err, js)
	}
	if v.Commit == nil || *v.Commit != head {
		t.Errorf("version --json commit = %v, want %s\n%s", v.Commit, head, js)
	}
	if v.Modified == nil {
		t.Errorf("version --json without modified:\n%s", js)
	}
	if v.CommitTime == nil {
		t.Errorf("version --json without commit_time:\n%s", js)
	} else if _, err := time.Parse(time.RFC3339, *v.CommitTime); err != nil {
		t.Errorf("version --json commit_time: %v", err)
	}
	if v.Version == "" || v.Version == "dev" {
		// Go 1.24 and later stamp a checkout's build with a
		// pseudo-version of its commit.
		t.Errorf("version --json version = %q, want the module version the go command stamped", v.Version)
	}
}

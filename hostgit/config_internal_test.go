package hostgit

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestOverridesWithoutARepository covers the keys the end-to-end tests
// cannot plant cheaply (git:// proxies, alternates) and the order of the
// credential helpers.
func TestOverridesWithoutARepository(t *testing.T) {
	es := []entry{
		{scope: "system", key: "credential.helper", value: "sys"},
		{scope: "global", key: "credential.https://example.com.helper", value: "url"},
		{scope: "global", key: "core.alternaterefsprefixes", value: "refs/heads/"},
		{scope: "local", key: "credential.helper", value: "!planted"},
		{scope: "local", key: "core.gitproxy", value: "planted for example.com"},
		{scope: "local", key: "core.alternaterefscommand", value: "planted"},
		{scope: "local", key: "remote.o=x.uploadpack", value: "planted"},
		{scope: "global", key: "remote.o=x.uploadpack", value: "/opt/git/upload-pack"},
		{scope: "local", key: "gpg.program", value: "planted"},
		{scope: "command", key: "core.hookspath", value: "/etc/hooks"},
	}
	ov := computeOverrides(es, []string{"GIT_SSH=/usr/bin/my ssh"})
	get := func(k string) []string {
		var vs []string
		for _, p := range ov.pins {
			if p.key == k {
				vs = append(vs, p.value)
			}
		}
		return vs
	}
	for _, c := range []struct {
		key  string
		want []string
	}{
		{"core.hooksPath", []string{"/etc/hooks"}},
		{"gpg.program", []string{"gpg"}},
		{"core.alternaterefscommand", []string{`f() { unset GIT_DIR GIT_COMMON_DIR GIT_WORK_TREE GIT_INDEX_FILE; git --git-dir="$1" for-each-ref --format="%(objectname)" refs/heads/; }; f`}},
		{"credential.helper", []string{"", "sys"}},
		{"credential.https://example.com.helper", []string{"url"}},
	} {
		if got := get(c.key); !slices.Equal(got, c.want) {
			t.Errorf("%s = %q, want %q", c.key, got, c.want)
		}
	}
	if got := ov.uploadPack["o=x"]; got != "/opt/git/upload-pack" {
		t.Errorf("upload-pack of o=x = %q", got)
	}
	for _, want := range []string{"GIT_PROXY_COMMAND=", "GIT_SSH_COMMAND='/usr/bin/my ssh'"} {
		if !slices.Contains(ov.env, want) {
			t.Errorf("env %q lacks %s", ov.env, want)
		}
	}
	args := packPrograms([]string{"-c", "a=b", "fetch", "--quiet", "--", "o=x", "refs/heads/main"}, ov)
	if want := []string{"-c", "a=b", "fetch", "--upload-pack=/opt/git/upload-pack", "--quiet", "--", "o=x", "refs/heads/main"}; !slices.Equal(args, want) {
		t.Errorf("fetch args = %q, want %q", args, want)
	}
}

// TestLookPathSkipsRelativeEntries: the git ralph runs is never one a
// relative PATH entry finds in the directory ralph was started in (an
// agent's tree).
func TestLookPathSkipsRelativeEntries(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "bin", "git"), filepath.Join(dir, "git")} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho planted\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", "bin::.")
	if p, err := lookPath("git"); err == nil {
		t.Errorf("lookPath = %s; want not found", p)
	}
	if got := absolutePath("bin:/usr/bin::.:/bin"); got != "/usr/bin:/bin" {
		t.Errorf("absolutePath = %q", got)
	}
}
